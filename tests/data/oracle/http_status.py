"""A loopback HTTP server for the WebFetch cases: /status/N answers status N with a short
body; it writes its port to ./port and exits once ./port is gone (the workspace removed)
or after ten minutes, the same for the recording and the replay.

With `--tls` it speaks HTTPS with a self-signed certificate for 127.0.0.1 (made by
openssl, kept in memory): the reference upgrades every http:// URL whose host has a dot
to https://, so its recording needs TLS. With `--plain` it speaks HTTP, as agentd's
replay fetches http://127.0.0.1 as it is."""

import http.server
import subprocess
import tempfile
import ssl
import os
import sys
import threading
import time

BODY = "<html><body><h1>Status {code}</h1><p>The server answered {code}.</p></body></html>\n"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        parts = self.path.strip("/").split("/")
        code = int(parts[1]) if len(parts) == 2 and parts[0] == "status" else 404
        body = b"" if "empty" in self.path else BODY.format(code=code).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if sys.argv[1:2] == ["--tls"]:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        with tempfile.TemporaryDirectory() as d:
            cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
                + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
                + ["-keyout", key, "-out", cert],
                check=True,
                capture_output=True,
            )
            tls.load_cert_chain(cert, key)
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    port_file = os.path.abspath("port")
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    deadline = time.monotonic() + 600
    while os.path.exists(port_file) and time.monotonic() < deadline:
        time.sleep(0.5)
    sys.exit(0)


if __name__ == "__main__":
    main()
