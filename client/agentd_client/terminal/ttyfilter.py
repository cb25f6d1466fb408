"""What a task in the sandbox may do to a person's terminal (`exec -it`, `attach-task`).

A task's output reaches the person's terminal as it printed it (colours, a full-screen
editor), through an allow-list: text, the ordinary C0 controls, and the escape sequences
a program needs to draw (cursor motion, erasing, SGR, scroll regions, the modes below).
Everything else is dropped whole: clipboard writes (OSC 52), titles and cwd reports (OSC
0/1/2/7), every other OSC but hyperlinks (OSC 8, http/https/file only: the terminal shows
the target), device control and the other strings (DCS, APC, PM, SOS), requests that
answer with what the task wrote (a title report), keyboard locks, 8-bit C1 controls.

The parser is incremental: a sequence split across reads is held until it is whole, and
only whole, allowed sequences are passed, so the person's terminal is always between
sequences when the task stops. The modes the task turns on are tracked, and `restore()`
answers the bytes that undo exactly those (nothing the task did not set is touched:
resetting a scroll region or origin mode moves the cursor home, which is why a fixed list
of resets scrambled the screen), ending on a fresh line.
"""

from __future__ import annotations

import re
import threading

ESC = 0x1B
BEL = 0x07
# Ground: a run of text passed as it is: the allowed C0 controls (BEL BS HT LF VT FF CR),
# printable ASCII, and well-formed UTF-8 but for the 8-bit C1 controls (U+0080..U+009F,
# which a terminal may run as CSI, OSC, ...). A byte that is none of these (a C0 control
# not allowed, a stray or overlong byte that an 8-bit terminal would read as C1) is shown
# as U+FFFD; SO and SI are tracked; ESC starts a sequence.
_ASCII = re.compile(rb"[\x07-\x0d\x20-\x7f]+")
_TEXT = re.compile(
    rb"(?:[\x07-\x0d\x20-\x7f]|\xc2[\xa0-\xbf]|[\xc3-\xdf][\x80-\xbf]"
    rb"|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]"
    rb"|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})+"
)
# The start of a UTF-8 character cut by the end of a read: held for the next one.
_CUT = re.compile(rb"(?:[\xc2-\xdf]|[\xe0-\xef][\x80-\xbf]?|[\xf0-\xf4][\x80-\xbf]{0,2})\Z")
REPLACEMENT = "\ufffd".encode()
# A whole CSI in one read (the common case), taken at once; else byte by byte.
_WHOLE_CSI = re.compile(rb"\x1b\[([\x20-\x3f]{0,%d})([\x40-\x7e])" % 256)

# A sequence longer than this is not one a program draws with: dropped.
MAX_CSI = 256
MAX_OSC = 8192

# CSI finals with no private marker that draw: cursor motion, erase, insert/delete, scroll.
_DRAW = frozenset(b"@ABCDEFGHIJKLMPSTXZ`abdef")
# DEC private modes a program may set, with the terminal's default (True: set).
DEC_MODES: dict[int, bool] = {
    1: False,  # application cursor keys (DECCKM)
    5: False,  # reverse video (DECSCNM)
    6: False,  # origin mode (DECOM)
    7: True,  # autowrap (DECAWM)
    9: False,  # X10 mouse
    12: False,  # blinking cursor
    25: True,  # cursor shown (DECTCEM)
    47: False,  # alternate screen
    66: False,  # application keypad (DECNKM)
    69: False,  # left and right margins (DECLRMM)
    1000: False,  # mouse reporting ...
    1002: False,
    1003: False,
    1004: False,  # focus events
    1005: False,
    1006: False,
    1007: False,  # alternate scroll
    1015: False,
    1016: False,
    1047: False,  # alternate screen
    1049: False,  # alternate screen, cursor saved
    2004: False,  # bracketed paste
    2026: False,  # synchronized output
}
_ALT_SCREENS = (1049, 1047, 47)
# Modes whose reset homes the cursor: undone between a cursor save and restore (origin
# mode, which a restore sets back, is reset there too but before the restore).
_HOMING = (69,)
# ANSI modes (SM/RM): insert (IRM) and newline (LNM), both off by default.
ANSI_MODES = (4, 20)
_LINK_SCHEMES = (b"http://", b"https://", b"file://")


class TerminalFilter:
    """Feeds a task's output through the allow-list; remembers what it set. Thread-safe:
    the output thread feeds while the main thread may close it (then feeds pass nothing,
    so nothing of the task's lands after the reset)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._state = "ground"
        self._seq = bytearray()  # the sequence being read (CSI, OSC, ESC+intermediates)
        self._string = ""  # the kind of string being skipped or read: osc, dcs, ...
        self._overflow = False
        self._cut = b""  # a UTF-8 character's first bytes, cut by the end of a read
        self.dec: dict[int, bool] = {}  # DEC modes the task changed, as they stand now
        self.ansi: dict[int, bool] = {}
        self.sgr = False  # a style other than the default is in effect
        self.region = False  # a scroll region (DECSTBM) is set
        self.charsets = False  # G0/G1 designated other than ASCII
        self.shifted = False  # SO: G1 in use
        self.cursor_style = False  # DECSCUSR
        self.link = False  # an OSC 8 hyperlink left open
        self.kitty_pushes = 0
        self.kitty_set = False
        self.modify_keys: set[int] = set()  # xterm modifyOtherKeys resources set
        self.at_line_start = True
        self._main_at_line_start = True  # the main screen's, while the alternate is shown

    # feeding
    def feed(self, data: bytes) -> bytes:
        with self._lock:
            if self._closed:
                return b""
            if self._cut:
                data, self._cut = self._cut + data, b""
            out = bytearray()
            i, n = 0, len(data)
            while i < n:
                if self._state != "ground":
                    i = self._step(data, i, out)
                    continue
                m = _ASCII.match(data, i) or _TEXT.match(data, i)
                if m is not None:
                    self._text(m.group(), out)
                    i = m.end()
                    continue
                b = data[i]
                if b == ESC and (csi := _WHOLE_CSI.match(data, i)) is not None:
                    self._csi(csi.group(1), csi.group(2)[0], out)
                    i = csi.end()
                    continue
                if b == ESC:
                    self._state = "esc"
                    self._seq = bytearray()
                elif b in (0x0E, 0x0F):
                    self.shifted = b == 0x0E
                    out.append(b)
                elif _CUT.match(data, i):
                    self._cut = data[i:]  # the rest of the character comes next
                    break
                elif b >= 0x80:
                    out += REPLACEMENT  # not UTF-8: shown as what it is, never run
                    self.at_line_start = False
                # else: a C0 control not allowed (NUL, ENQ, ...): dropped
                i += 1
            return bytes(out)

    def _text(self, run: bytes, out: bytearray) -> None:
        out += run
        tail = run.rstrip(b"\n")
        if tail:
            self.at_line_start = tail.endswith(b"\r")

    def _step(self, data: bytes, i: int, out: bytearray) -> int:
        """One byte (or a run of a string's bytes) in a state other than ground."""
        b = data[i]
        state = self._state
        if state in ("string", "string_esc"):
            return self._string_bytes(data, i, out)
        if b in (0x18, 0x1A):  # CAN, SUB: the sequence is abandoned
            self._state = "ground"
            return i + 1
        if b == ESC:  # a new sequence starts; the unfinished one is dropped
            self._state = "esc"
            self._seq = bytearray()
            return i + 1
        if state == "esc":
            self._escape(b, out)
        elif state == "esc_inter":
            self._escape_intermediate(b, out)
        elif state == "csi":
            self._csi_byte(b, out)
        return i + 1

    # ESC sequences
    def _escape(self, b: int, out: bytearray) -> None:
        self._state = "ground"
        if b == ord("["):
            self._state = "csi"
            self._overflow = False
        elif b == ord("]"):
            self._start_string("osc")
        elif b in b"PX^_":
            self._start_string({0x50: "dcs", 0x58: "sos", 0x5E: "pm", 0x5F: "apc"}[b])
        elif 0x20 <= b <= 0x2F:
            self._state = "esc_inter"
            self._seq = bytearray([b])
        elif b in b"78DEM":  # save/restore cursor, index, next line, reverse index
            out += bytes([ESC, b])
            self.at_line_start = b == ord("E") or (self.at_line_start and b != ord("8"))
        elif b == ord("="):
            self._set_dec(66, True)
            out += b"\x1b="
        elif b == ord(">"):
            self._set_dec(66, False)
            out += b"\x1b>"
        # else dropped: RIS (ESC c: clears the person's scrollback), DECID (answers with
        # an identity as typed input), locking shifts, tab stops, ...

    def _escape_intermediate(self, b: int, out: bytearray) -> None:
        if 0x20 <= b <= 0x2F:
            self._seq.append(b)
            if len(self._seq) > 4:
                self._state = "ground"
            return
        self._state = "ground"
        if len(self._seq) == 1 and self._seq[0] in b"()" and b in b"0AB":
            out += bytes([ESC, self._seq[0], b])  # a charset for G0/G1 (line drawing)
            self.charsets = self.charsets or b != ord("B")
        # else dropped: 7/8-bit controls, UTF-8 off, line sizes, screen alignment ...

    # CSI
    def _csi_byte(self, b: int, out: bytearray) -> None:
        if 0x20 <= b <= 0x3F:
            if len(self._seq) < MAX_CSI:
                self._seq.append(b)
            else:
                self._overflow = True
            return
        if 0x40 <= b <= 0x7E:
            self._state = "ground"
            if not self._overflow:
                self._csi(bytes(self._seq), b, out)
            return
        # another control inside a CSI (a terminal would run it): the sequence is dropped
        self._state = "ground"

    def _csi(self, body: bytes, final: int, out: bytearray) -> None:
        marker = body[:1] if body[:1] in (b"?", b">", b"<", b"=") else b""
        rest = body[len(marker) :]
        cut = len(rest)
        while cut and 0x20 <= rest[cut - 1] <= 0x2F:
            cut -= 1
        params, inter = rest[:cut], rest[cut:]
        if any(0x3C <= c <= 0x3F for c in params):  # a marker where a parameter belongs
            return
        kept = self._csi_kept(marker, params, inter, final)
        if kept is not None:
            out += b"\x1b[" + kept
            moves = final not in b"mhlnc" or (marker == b"?" and 6 in _numbers(params))
            if moves:  # the cursor may be anywhere now
                self.at_line_start = False

    def _csi_kept(self, marker: bytes, params: bytes, inter: bytes, final: int) -> bytes | None:
        """The CSI to pass (what follows ESC [), or None to drop it."""
        f = bytes([final])
        numbers = _numbers(params)
        if not marker and not inter:
            if final == ord("m"):
                if not re.fullmatch(rb"[0-9;:]*", params):
                    return None
                # Set unless every parameter is 0 (a reset); a colour's 0 counts as set.
                self.sgr = any(n for n in numbers)
                return params + f
            if final in _DRAW:
                if final == ord("J") and 3 in numbers:
                    return None  # erase the scrollback: the person's, not the task's
                if final in b"ST" and len(numbers) > 1:
                    return None  # xterm's mouse highlight tracking
                return params + f
            if final == ord("r"):
                self.region = any(n for n in numbers)
                return params + f
            if final in b"su" and not params:
                return f
            if final in b"hl":
                allowed = [n for n in numbers if n is not None and n in ANSI_MODES]
                for n in allowed:
                    self.ansi[n] = final == ord("h")
                return _joined(allowed) + f if allowed else None
            if final == ord("c") and numbers in ([], [0]):
                return params + f  # primary device attributes: the answer is the terminal's
            if final == ord("n") and numbers in ([5], [6]):
                return params + f  # status, cursor position: answered as typed input
            return None
        if marker == b"?" and not inter:
            if final in b"hl":
                allowed = [n for n in numbers if n is not None and (n in DEC_MODES or n == 1048)]
                for n in allowed:
                    if n != 1048:
                        self._set_dec(n, final == ord("h"))
                return b"?" + _joined(allowed) + f if allowed else None
            if final in b"JK" or (final == ord("n") and numbers == [6]) or final == ord("u"):
                return b"?" + params + f if final != ord("u") or not params else None
            return None
        if marker == b"?" and inter == b"$" and final == ord("p"):
            return b"?" + params + b"$p"  # is a mode set? (answered as typed input)
        if marker == b">" and not inter:
            if final == ord("c") or (final == ord("q") and numbers in ([], [0])):
                return b">" + params + f  # secondary attributes, terminal version
            if final == ord("m"):
                if numbers:
                    resource = numbers[0]
                    if resource is None:
                        return None
                    if len(numbers) > 1 and numbers[1]:
                        self.modify_keys.add(resource)
                    else:
                        self.modify_keys.discard(resource)
                return b">" + params + f
            if final == ord("u"):
                self.kitty_pushes = min(self.kitty_pushes + 1, 64)
                return b">" + params + f
            return None
        if marker == b"<" and not inter and final == ord("u"):
            count = numbers[0] if numbers and numbers[0] else 1
            self.kitty_pushes = max(0, self.kitty_pushes - count)
            return b"<" + params + f
        if marker == b"=" and not inter and final == ord("u"):
            self.kitty_set = True
            return b"=" + params + f
        if not marker and inter == b" " and final == ord("q"):
            self.cursor_style = bool(numbers and numbers[0])
            return params + b" q"
        if not marker and inter == b"!" and final == ord("p"):
            return b"!p"  # soft reset
        return None

    def _set_dec(self, mode: int, on: bool) -> None:
        if mode in _ALT_SCREENS:
            showing = any(self.dec.get(m, False) for m in _ALT_SCREENS)
            if on and not showing:
                self._main_at_line_start = self.at_line_start
            elif not on and showing:
                self.at_line_start = self._main_at_line_start
        self.dec[mode] = on

    # strings: OSC, DCS, SOS, PM, APC
    def _start_string(self, kind: str) -> None:
        self._state = "string"
        self._string = kind
        self._seq = bytearray()
        self._overflow = False

    def _string_bytes(self, data: bytes, i: int, out: bytearray) -> int:
        if self._state == "string_esc":
            if data[i] == ord("\\"):
                self._end_string(out)
                return i + 1
            # ESC then something else ends the string in a terminal and starts a sequence
            self._state = "esc"
            self._seq = bytearray()
            return i
        n = len(data)
        j = i
        while j < n:
            c = data[j]
            if c == ESC or (c == BEL and self._string == "osc") or c in (0x18, 0x1A):
                break
            j += 1
        if self._string == "osc":
            if len(self._seq) + (j - i) <= MAX_OSC:
                self._seq += data[i:j]
            else:
                self._overflow = True
        if j == n:
            return n
        c = data[j]
        if c == ESC:
            self._state = "string_esc"
        elif c == BEL:
            self._end_string(out)
        else:  # CAN, SUB
            self._state = "ground"
        return j + 1

    def _end_string(self, out: bytearray) -> None:
        self._state = "ground"
        if self._string != "osc" or self._overflow:
            return
        number, _, rest = bytes(self._seq).partition(b";")
        if number != b"8" or not re.fullmatch(rb"[\x20-\x7e]*", rest):
            return
        params, _, uri = rest.partition(b";")
        if uri and not uri.lower().startswith(_LINK_SCHEMES):
            return
        out += b"\x1b]8;" + params + b";" + uri + b"\x1b\\"
        self.link = bool(uri)

    # the end
    def restore(self) -> bytes:
        """The bytes that undo what the task set, ending on a fresh line; feeds from now
        on pass nothing."""
        with self._lock:
            self._closed = True
            return self._undo()

    def _undo(self) -> bytes:
        out = bytearray()
        at_line_start = self.at_line_start
        if any(self.dec.get(m, False) for m in _ALT_SCREENS):
            at_line_start = self._main_at_line_start  # the main screen comes back
        changed = {m: on for m, on in self.dec.items() if on != DEC_MODES[m]}
        if 2026 in changed:
            out += b"\x1b[?2026l"
        for mode in _ALT_SCREENS:
            if changed.pop(mode, None) is not None:
                out += b"\x1b[?%dl" % mode
        homing = [m for m in _HOMING if m in changed]
        if self.region or homing:
            # Each of these moves the cursor home: undone with the cursor kept where it is.
            out += b"\x1b7"
            if self.region:
                out += b"\x1b[r"
            for mode in homing:
                del changed[mode]
                out += b"\x1b[?%dl" % mode
            out += b"\x1b8"
        if changed.pop(6, None) is not None:
            out += b"\x1b[?6l"  # homes the cursor (DECRC would set it again)
        for mode, _on in sorted(changed.items()):
            if mode != 2026:
                out += b"\x1b[?%d%c" % (mode, ord("h") if DEC_MODES[mode] else ord("l"))
        for mode, on in sorted(self.ansi.items()):
            if on:
                out += b"\x1b[%dl" % mode
        for _ in range(self.kitty_pushes):
            out += b"\x1b[<u"
        if self.kitty_set and not self.kitty_pushes:
            out += b"\x1b[=0;1u"
        for resource in sorted(self.modify_keys):
            out += b"\x1b[>%dm" % resource
        if self.cursor_style:
            out += b"\x1b[0 q"
        if self.link:
            out += b"\x1b]8;;\x1b\\"
        if self.charsets:
            out += b"\x1b(B\x1b)B"
        if self.shifted:
            out += b"\x0f"
        if self.sgr:
            out += b"\x1b[0m"
        if not at_line_start:
            out += b"\r\n"
        return bytes(out)


def _numbers(params: bytes) -> list[int | None]:
    """A CSI's parameters: numbers, None where one is empty; sub-parameters (:) ignored."""
    if not params:
        return []
    found: list[int | None] = []
    for part in params.split(b";"):
        head = part.split(b":", 1)[0]
        found.append(int(head) if head.isdigit() and len(head) <= 6 else None)
    return found


def _joined(numbers: list[int]) -> bytes:
    return b";".join(b"%d" % n for n in numbers)
