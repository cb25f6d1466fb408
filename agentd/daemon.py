"""The daemon's parts, assembled: store, sessions, tools, executor, servicer, server."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import fields
from typing import Any

import grpc

import agentd_sandbox
from agentd.api.handlers.calls import CallHandlers
from agentd.api.handlers.checkpoints import CheckpointHandlers
from agentd.api.handlers.credentials import CredentialHandlers
from agentd.api.handlers.events import EventHandlers
from agentd.api.handlers.outputs import OutputHandlers
from agentd.api.handlers.permissions import PermissionHandlers
from agentd.api.handlers.ports import PortHandlers
from agentd.api.handlers.review import ReviewHandlers
from agentd.api.handlers.sessions import SessionHandlers
from agentd.api.handlers.status import StatusHandlers
from agentd.api.handlers.task_io import TaskIOHandlers
from agentd.api.handlers.trust import TrustHandlers
from agentd.api.server import Server
from agentd.api.service import Servicer
from agentd.api.terminals.server import TerminalServer, terminal_socket_path
from agentd.api.terminals.tokens import TerminalTokens
from agentd.calls.executor import Executor
from agentd.calls.tasks import TaskStarter
from agentd.changes.checkpoints import Checkpoints
from agentd.changes.review import Reviews
from agentd.changes.service import ChangeTracker
from agentd.credentials import config as credential_config
from agentd.credentials.masked_config import load_masked
from agentd.credentials.masks import CredentialMasks
from agentd.credentials.service import CredentialService
from agentd.credentials.ssh_agent_service import SshAgentService
from agentd.foundation import logs, metrics
from agentd.foundation.config import Config
from agentd.foundation.errors import Unavailable
from agentd.foundation.looplag import LoopWatch
from agentd.foundation.notify import Notifier
from agentd.foundation.offload import Offload
from agentd.foundation.privdir import ensure_private_dir
from agentd.fs import access as fsaccess
from agentd.fs import reserve, workspace_access
from agentd.fs.identity import FsIdentity
from agentd.fs.temp_ledger import TempLedger
from agentd.fs.tmpfs import TmpMounts
from agentd.network.service import NetworkService
from agentd.permissions import Asker, PermissionEngine, SettingsLoader, TrustStore
from agentd.permissions.network_rules import NetworkRulesSource, network_asker
from agentd.permissions.push_asks import push_asker
from agentd.permissions.ssh_agent_ask import ssh_agent_asker
from agentd.runs.command import Commands
from agentd.runs.output.registry import Outputs
from agentd.runs.shim.spawn import Forkserver
from agentd.runs.tasks import TaskManager
from agentd.sandboxing import policy as sandbox_policy
from agentd.sandboxing.groups import SessionGroups
from agentd.sandboxing.policy import session_tmp_path
from agentd.sandboxing.readonly import StagingDir
from agentd.sandboxing.runtime import SandboxRuntime
from agentd.sessions import gids, recovery
from agentd.sessions.event_types import CwdChanged, EventBody, TodoPayload, TodosChanged
from agentd.sessions.retention import Reaper
from agentd.sessions.session import Session, SessionManager
from agentd.sessions.store import Store
from agentd.tools import default_registry
from agentd.tools.services import Services
from agentd_client.v1 import agentd_pb2, agentd_pb2_grpc

log = logging.getLogger(__name__)

# How often the state database is checked for being deleted or replaced.
STATE_CHECK_SECONDS = 5.0

# Settings a SIGHUP applies to the running daemon; any other change waits for a restart.
LIVE_SETTINGS = (
    "allow_rules",
    "deny_rules",
    "ask_rules",
    "trusted_settings",
    "log_level",
    "network_allowed_domains",
    "network_denied_domains",
    "network_denied_domain_reasons",
    "network_presets",
    "network_allow_private_hosts",
)


def _sandbox_report() -> dict[str, Any]:
    """What the sandbox can enforce here, for `agentctl status`; never fatal."""
    try:
        return agentd_sandbox.check()
    except Exception as exc:  # a broken probe must not stop the daemon
        log.warning("sandbox check failed: %s", exc)
        return {"error": str(exc)}


def _report_unknown(kind: str, where: str, ids: list[str]) -> None:
    """One line for what a start-up sweep left because the database does not know its
    session (a journal restored or accepted short): never removed, said once a start."""
    if ids:
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        log.warning(
            "left the %s of %d sessions the state database does not know, in %s (%s): "
            "not removed, in case they are of sessions a lost or restored journal no "
            "longer holds; remove them by hand once sure",
            kind,
            len(ids),
            where,
            shown,
        )


class Daemon:
    """Every part built once, here, and handed to what uses it: nothing is looked up
    through a module (tests/test_no_singletons.py keeps it so). Made on the daemon's
    running loop (the network's and the ssh-agent's services answer on it)."""

    def __init__(self, config: Config, accept_journal_loss: bool = False) -> None:
        """`accept_journal_loss`: a state database that lacks acknowledged commits is
        used as it is (said in the log) instead of stopping the start."""
        self.config = config
        ensure_private_dir(config.state_dir, "state dir")
        if gids.enabled(config.sandbox_gid_range):
            gids.check_range(config.sandbox_gid_range)
        self.store = Store(config.db_path, accept_loss=accept_journal_loss)
        # Temp files of writes a crash interrupted go before any new write is made.
        self.temp_ledger = TempLedger(os.path.join(config.state_dir, "pending-writes"))
        if removed := fsaccess.remove_left_temps(self.temp_ledger):
            log.info("removed %d temp files of writes interrupted by a crash", removed)
        self.sessions = SessionManager(self.store, config)
        # Before anything new is journaled: the calls a crash left open end, as interrupted.
        recovery.end_interrupted_calls(self.sessions)
        self.tasks = TaskManager(
            self.store,
            self._emit,
            config.task_max_seconds,
            shim_root=os.path.join(config.state_dir, "shims"),
        )
        outputs = Outputs(config, self.store)
        # Each session's control group; found at start (see start()).
        self.groups = SessionGroups(config)
        self.sandbox_report = _sandbox_report()
        self.reaper = Reaper(
            config,
            self.sessions,
            self.tasks,
            outputs,
            tmp_dir_of=lambda session: session_tmp_path(session, config),
        )
        self.outputs = outputs
        self.asker = asker = Asker(self.sessions, config.permission_timeout_seconds)
        self.changes = ChangeTracker(config, asker)
        if config.checkpoints:
            self.changes.checkpoints = Checkpoints(config, self.sessions)
            self.reaper.on_reaped.append(self.changes.checkpoints.reap)
            self.changes.reviews = Reviews(
                self.changes.checkpoints,
                config.state_dir,
                config.checkpoint_call_paths,
                config.checkpoint_call_bytes,
            )
            if swept := self.changes.reviews.sweep():
                log.warning("%d review view(s) a stopped daemon left were removed", swept)
            self.reaper.on_reaped.append(self.changes.reap)
            if interrupted := self.changes.checkpoints.rows.interrupted():
                log.warning("%d restore(s) of checkpoints were interrupted by a crash", interrupted)
        # Proxied sessions' rules by name; a bad entry in the config stops start-up.
        self.network_rules = NetworkRulesSource(config, lambda: self.permissions.settings)
        loop = asyncio.get_running_loop()
        self.network = NetworkService(
            config,
            self.sessions,
            self.network_rules,
            network_asker(asker, self.sessions),
            asker.has_listeners,
            loop,
        )
        # The sandbox's ssh-agent, when hosts are configured for it.
        self.ssh_agent = (
            SshAgentService(
                config,
                self.sessions,
                self.network_rules,
                ssh_agent_asker(asker, self.sessions),
                asker.has_listeners,
                loop,
            )
            if config.ssh_agent_hosts
            else None
        )
        # Credential sources and routes; a bad entry stops start-up. They are one more
        # listener in each namespace, so only where the network keeps namespaces.
        self.credential_config = credential_config.load(config)
        self.credentials: CredentialService | None = None
        if self.network.available():
            self.credentials = CredentialService(
                self.credential_config,
                config.state_dir,
                self.network,
                self.sessions,
                push_asker(asker),
                asker.has_listeners,
            )
            self.network.listeners.append(self.credentials)
        # sandbox.credentials: placeholders in every sandbox; TLS terminated by the proxy
        # for the hosts they go to (where the network keeps namespaces).
        masked = load_masked(
            config.credential_env_vars,
            config.credential_files,
            self.credential_config.sources,
        )
        # A workspace's entries as its settings were last read (before every call).
        self.masks = CredentialMasks(
            masked,
            config.state_dir,
            self.sessions,
            config.network_upstream_ca_file,
            workspace=lambda s: self.permissions.settings.credentials_of(s),
            to_daemon=self.network.proxy_loop.to_daemon,
        )
        if self.network.available():
            self.network.listeners.append(self.masks)
        self.sandbox = SandboxRuntime(
            network=self.network,
            ssh_agent=self.ssh_agent,
            groups=self.groups,
            tmp_mounts=TmpMounts(),
            staging=StagingDir(),
            masks=self.masks,
        )
        # Shims are forked from it: warm before the first Bash call (start()).
        self.forkserver = Forkserver()
        self.commands = Commands(
            config,
            self.sessions,
            self.sandbox,
            self.forkserver,
            self.tasks,
            outputs,
            self.changes,
            self._cwd_changed,
        )
        self.offload = Offload()
        self.services = Services(
            config=config,
            tasks=self.tasks,
            outputs=outputs,
            on_todos_changed=self._todos_changed,
            commands=self.commands,
            sandbox=self.sandbox,
            temp_ledger=self.temp_ledger,
            offload=self.offload,
        )
        self.sessions.on_close.append(lambda s: self.tasks.stop_session(s.id))
        settings = SettingsLoader(config, TrustStore(config, self.store))
        self.permissions = PermissionEngine(config, self.sessions, asker, settings=settings)
        self.executor = Executor(
            default_registry(), self.sessions, config, self.permissions, services=self.services
        )
        # Closing a session ends its running calls too, not only its background tasks.
        self.sessions.on_close.append(lambda s: self.executor.cancel_all(session_id=s.id))
        # Last: once its calls and tasks have ended, its temp dir goes, then its group
        # (what is left in it killed).
        self.sessions.on_close.append(self.reaper.on_close)
        self.sessions.on_close.append(self._release_group)
        self.sessions.on_close.append(self._close_network)
        self.sessions.on_create.append(self.reaper.on_create)
        approvals = self.permissions.approvals
        # A workspace the session's sandbox identity cannot use is refused at once.
        self.sessions.admit.append(self._workspace_usable)
        self.sessions.on_create.append(self._index_changes)
        terminal_tokens = TerminalTokens()
        self.ports = PortHandlers(
            self.sessions, self.network, terminal_tokens, terminal_socket_path(config.socket_path)
        )
        task_io = TaskIOHandlers(
            self.sessions,
            TaskStarter(self.executor),
            self.tasks,
            self._emit,
            terminal_tokens,
            terminal_socket_path(config.socket_path),
        )
        # A task's terminal bytes off gRPC (agentd/api/terminals/).
        self.task_io = task_io
        self.terminals = TerminalServer(
            config.socket_path, terminal_tokens, outputs, task_io, self.ports
        )
        checkpoint_handlers = CheckpointHandlers(
            self.sessions, self.changes, config, self.temp_ledger
        )
        self.servicer = Servicer(
            status=StatusHandlers(
                self.sessions, self.executor, self.services, asker, self.reaper, self.sandbox_report
            ),
            sessions=SessionHandlers(self.sessions, approvals, self.reaper, self.network),
            permissions=PermissionHandlers(self.sessions, asker),
            trust=TrustHandlers(approvals),
            calls=CallHandlers(self.sessions, self.executor),
            events=EventHandlers(self.sessions),
            outputs=OutputHandlers(self.sessions, self.tasks, outputs),
            credentials=CredentialHandlers(self.credentials, self.ssh_agent, self.masks),
            task_io=task_io,
            ports=self.ports,
            checkpoints=checkpoint_handlers,
            review=ReviewHandlers(
                self.sessions, self.changes, config, self.temp_ledger, checkpoint_handlers.locks
            ),
        )
        self.server: Server | None = None
        self._stopped = asyncio.Event()
        self.notifier = Notifier()
        self._metrics_server: Any = None
        self.loop_watch = LoopWatch()
        tools = self.executor.registry.tools
        metrics.know_tools({n: t.name for t in tools for n in (t.name, *t.aliases)})
        metrics.watch(metrics.RUNNING_CALLS, lambda: self.executor.running_count)
        metrics.watch(metrics.RUNNING_TASKS, self.tasks.running_count)
        metrics.watch(metrics.OPEN_SESSIONS, lambda: len(self.sessions.list()))
        metrics.watch(metrics.PENDING_ASKS, lambda: asker.pending_count)
        metrics.watch(metrics.STATE_DISK_FULL, lambda: bool(self.store.full_since))
        metrics.watch(metrics.EVENTS_UNJOURNALED, lambda: self.store.unjournaled)
        metrics.watch(metrics.STATE_DATABASE_PROBLEM, lambda: bool(self.store.problem))
        self._state_watch: asyncio.Task[None] | None = None

    def _workspace_usable(self, session: Session) -> None:
        workspace_access.check(
            session.workspace_roots,
            sandbox_policy.run_as(session, self.config),
            sandbox_policy.run_as_chosen_by(session, self.config),
            root_daemon=os.geteuid() == 0,
        )

    async def _release_group(self, session: Session) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.groups.release, session.id)

    async def _close_network(self, session: Session) -> None:
        await self.network.close_session(session)
        self.masks.forget(session.id)
        self.permissions.settings.forget(session.id)
        if self.ssh_agent is not None:
            await self.ssh_agent.close_session(session)

    def _index_changes(self, session: Session) -> None:
        """A new session's workspaces are indexed for held changes before its first call."""
        try:
            ident = sandbox_policy.run_as(session, self.config)
        except OSError:
            return  # its first call says why its workspace cannot be used
        self.changes.prepare(session, FsIdentity(*ident) if ident else None)

    def _session_open(self, session_id: str) -> bool:
        return any(s.id == session_id for s in self.sessions.list())

    def _session_known(self, session_id: str) -> bool:
        return any(s.id == session_id for s in self.sessions.list(True))

    def _session_closed(self, session_id: str) -> bool:
        """Whether the database knows the session, closed (what a sweep may remove)."""
        return any(s.id == session_id and s.closed for s in self.sessions.list(True))

    async def _todos_changed(self, session: Session, todos: list[TodoPayload]) -> None:
        self.sessions.log(session.id).emit(TodosChanged(todos=todos))

    def _emit(self, session_id: str, body: EventBody) -> None:
        self.sessions.log(session_id).emit(body)

    def _cwd_changed(self, session: Session, cwd: str, previous: str) -> None:
        self.sessions.log(session.id).emit(CwdChanged(cwd=cwd, previous=previous))

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            self.groups.close()  # a daemon that does not start leaves no empty group
            raise

    async def _start(self) -> None:
        self.notifier.status("starting")
        if self.config.metrics_listen:  # first: a taken port must fail before we listen
            self._metrics_server = metrics.serve(self.config.metrics_listen)
        # Before anything is forked: on cgroup v2 the daemon may move into a leaf first.
        self.groups.start()
        self.sandbox_report["session_limits"] = {
            **self.groups.report(),
            "state_reserve_bytes": reserve.room(self.config.state_dir),
        }
        self.forkserver.start()  # warm before the first Bash call
        swept, unknown = self.network.sweep(self._session_open, self._session_closed)
        if swept:
            log.info("removed the network namespaces of %d sessions no longer open", swept)
        _report_unknown("network namespaces", self.network.dir, unknown)
        self.loop_watch.start()
        started = time.monotonic()
        # Their changes followed again, their proxies and ssh-agents served at once.
        adopted = await self.commands.readopt(self._session_open, self._session_known)
        if adopted:
            log.info("took over %d running task(s) in %.3fs", adopted, time.monotonic() - started)
        # The groups of sessions closed or gone meanwhile (the tasks taken over are of
        # open sessions and keep theirs).
        swept, unknown = self.groups.sweep(self._session_open, self._session_closed)
        if swept:
            log.info("removed the control groups of %d sessions no longer open", swept)
        _report_unknown("control groups", self.groups.where(), unknown)
        self.server = Server(self.config, self.servicer, self.sessions, self.network.holder)
        await self.server.start()
        if not await self.terminals.start():
            self.task_io.terminals = None  # OpenTerminal offers none: the gRPC streams serve
            self.ports.tokens = None  # nor OpenForward: ForwardMux serves
        # READY only once the socket answers a real RPC: a client that systemd starts
        # after us (After=agentd.service) must find a daemon that serves.
        await self._answers_on_socket()
        self.groups.say()
        self.changes.announce()  # once serving: a start that fails says only why
        if problem := reserve.warning(self.config.state_dir):
            log.warning("%s", problem)
        self.notifier.ready(self.status_line())
        self.notifier.start_watchdog(self.status_line)
        self.reaper.start()
        self._state_watch = asyncio.get_running_loop().create_task(self._watch_state())

    async def _watch_state(self) -> None:
        """The state database, looked at every few seconds: deleted or replaced under the
        daemon is logged at once (Store.check) and shown in the status."""
        while not self.store.check():
            await asyncio.sleep(STATE_CHECK_SECONDS)

    async def _answers_on_socket(self) -> None:
        async with grpc.aio.insecure_channel(f"unix:{self.config.socket_path}") as channel:
            stub = agentd_pb2_grpc.AgentdStub(channel)
            try:
                await stub.GetStatus(agentd_pb2.GetStatusRequest(), timeout=30, wait_for_ready=True)
            except grpc.aio.AioRpcError as exc:
                raise Unavailable(
                    f"agentd does not answer on its own socket {self.config.socket_path} "
                    f"({exc.code().name}: {exc.details()}); check that nothing else "
                    "removed or replaced it"
                ) from None

    def status_line(self) -> str:
        """The headline numbers, for systemctl status."""
        return (
            f"serving on unix:{self.config.socket_path}; sessions {len(self.sessions.list())}, "
            f"calls running {self.executor.running_count}, "
            f"tasks running {self.tasks.running_count()}, "
            f"asks pending {self.asker.pending_count}, "
            f"calls served {metrics.calls_served()}"
        )

    def reload(self, new: Config) -> str:
        """Apply the live settings of `new`; one line saying what changed. A bad config
        raises (AgentdError) before anything is applied, so the old one stays whole."""
        live = [k for k in LIVE_SETTINGS if getattr(new, k) != getattr(self.config, k)]
        later = sorted(
            f.name
            for f in fields(Config)
            if f.name not in LIVE_SETTINGS and getattr(new, f.name) != getattr(self.config, f.name)
        )
        logs.check_level(new.log_level)
        # Parses every rule and trusted entry: a bad one raises here. People's approvals
        # stay in the store and come along.
        settings = SettingsLoader(new, TrustStore(new, self.store))
        network_rules = self.network_rules.checked(new)
        self.notifier.reloading()
        for key in live:
            setattr(self.config, key, getattr(new, key))
        settings.config = self.config
        self.permissions.settings = settings
        self.permissions.approvals.settings = settings
        network_rules()  # the next connection of every session decides by them
        self.network.allow_private(self.config.network_allow_private_hosts)
        logs.set_level(self.config.log_level)
        self.notifier.reloaded(self.status_line())
        summary = "reloaded: " + (", ".join(live) if live else "nothing changed")
        if later:
            summary += f"; needs a restart to apply: {', '.join(later)}"
        return summary

    async def stop(self) -> None:
        if self._stopped.is_set():
            return
        log.info("agentd shutting down")
        self.notifier.stopping()
        await self.reaper.stop()
        if self._state_watch is not None:
            self._state_watch.cancel()
        # New calls are refused while running ones end now (their sandboxes with them)
        # and their callers get what was printed; then the background tasks stop.
        stopping = [self.executor.cancel_all()]
        self.ports.stop()  # forwarded connections end now, not after the server's grace
        if self.server is not None:
            stopping.append(self.server.stop())
        await self.terminals.stop()
        await asyncio.gather(*stopping)
        # A task that runs on keeps its session's network namespace for the next daemon.
        living = {t.session_id for t in self.tasks.tasks() if self.tasks.is_running(t.id)}
        if self.config.stop_tasks_on_exit:
            living = set()
            await self.tasks.stop_all()
        else:
            await self.tasks.leave()  # they run on; the next daemon takes them over
        # Nor is one of a session the database does not know removed (see _report_unknown).
        self.network.stop(keep=lambda sid: sid in living or not self._session_known(sid))
        if self.ssh_agent is not None:
            self.ssh_agent.stop(keep=living.__contains__)
        self.forkserver.close()
        self.offload.close()
        self.loop_watch.stop()
        self.groups.close(keep=lambda sid: not self._session_known(sid))
        self.sandbox.staging.close()
        self.changes.stop()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        await self.notifier.close()
        self.temp_ledger.close()
        self.store.close()
        self._stopped.set()

    def abandon(self) -> None:
        """A start that failed (a live socket, a bad certificate): the threads and
        processes made so far end, and nothing on disk is touched (namespaces and
        directories may belong to another daemon, or to the next one)."""
        self.network.proxy_loop.stop()
        if self.ssh_agent is not None:
            self.ssh_agent.served.stop()
        self.forkserver.close()
        self.offload.close()
        self.loop_watch.stop()
        self.changes.stop()
        self.store.close()

    async def wait(self) -> None:
        await self._stopped.wait()
