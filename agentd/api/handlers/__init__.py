"""One handler per RPC, grouped by what they serve (as E2B's envd does); each group
gets, typed, the parts of the daemon it needs, and does nothing but check the request,
call the domain, and map the answer back (messages built in agentd/api/wire.py).

status.py       GetStatus, ListTools, Classify
sessions.py     CreateSession, GetSession, ListSessions, CloseSession, CollectSessions
permissions.py  UpdatePermissions, ResolvePermission
trust.py        ListTrust, ApproveTrust, RevokeTrust
calls.py        RunTool, CallTool, RunTools, CancelCall
events.py       Attach, AppendAgentEvent
outputs.py      ListTasks, ReadOutput
task_io.py      StartTask, GetTaskTerminal, WriteInput, CloseInput, SignalTask, ResizeTask
rpc.py          what they share: errors as statuses, required fields, the caller
"""
