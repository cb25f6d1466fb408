"""The gRPC service: every RPC of the Agentd service bound to its one handler.

The handlers (agentd/api/handlers/, one module per group of RPCs) check what they are
sent, call the domain and map the answer back; nothing else lives here. grpc looks each
RPC up by name on the Servicer (add_AgentdServicer_to_server), so a handler missing
here fails the daemon's start, not a client's call.
"""

from __future__ import annotations

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


class Servicer:
    def __init__(
        self,
        status: StatusHandlers,
        sessions: SessionHandlers,
        permissions: PermissionHandlers,
        trust: TrustHandlers,
        calls: CallHandlers,
        events: EventHandlers,
        outputs: OutputHandlers,
        credentials: CredentialHandlers,
        task_io: TaskIOHandlers,
        ports: PortHandlers,
        checkpoints: CheckpointHandlers,
        review: ReviewHandlers,
    ) -> None:
        self.GetStatus = status.GetStatus
        self.ListTools = status.ListTools
        self.Classify = status.Classify

        self.CreateSession = sessions.CreateSession
        self.GetSession = sessions.GetSession
        self.ListSessions = sessions.ListSessions
        self.CloseSession = sessions.CloseSession
        self.CollectSessions = sessions.CollectSessions

        self.UpdatePermissions = permissions.UpdatePermissions
        self.ResolvePermission = permissions.ResolvePermission

        self.ListTrust = trust.ListTrust
        self.ApproveTrust = trust.ApproveTrust
        self.RevokeTrust = trust.RevokeTrust

        self.RunTool = calls.RunTool
        self.CallTool = calls.CallTool
        self.RunTools = calls.RunTools
        self.CancelCall = calls.CancelCall

        self.Attach = events.Attach
        self.AppendAgentEvent = events.AppendAgentEvent

        self.ListTasks = outputs.ListTasks
        self.ReadOutput = outputs.ReadOutput

        self.ListCredentials = credentials.ListCredentials
        self.StartTask = task_io.StartTask
        self.GetTaskTerminal = task_io.GetTaskTerminal
        self.WriteInput = task_io.WriteInput
        self.CloseInput = task_io.CloseInput
        self.SignalTask = task_io.SignalTask
        self.ResizeTask = task_io.ResizeTask
        self.OpenTerminal = task_io.OpenTerminal
        self.StartForward = ports.StartForward
        self.StopForward = ports.StopForward
        self.Forward = ports.Forward
        self.ForwardMux = ports.ForwardMux
        self.OpenForward = ports.OpenForward
        self.ListPorts = ports.ListPorts

        self.ListCheckpoints = checkpoints.ListCheckpoints
        self.DiffCheckpoint = checkpoints.DiffCheckpoint
        self.RestoreCheckpoint = checkpoints.RestoreCheckpoint
        self.RewindToCall = checkpoints.RewindToCall
        self.ListPendingChanges = review.ListPendingChanges
        self.ResolvePendingChanges = review.ResolvePendingChanges
