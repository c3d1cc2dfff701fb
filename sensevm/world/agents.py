"""Agents: start, pause, ask_human, resume, send and receive, plain and async (spec 15).

A plain agent's body runs on the VM's own frame chain: ``pause()`` detaches the frames from the
body's frame up to the one calling pause and hands control back to whoever called ``start`` or
``resume``; ``resume`` re-attaches them under its caller. So exactly one of caller and agent runs
at a time and output order is deterministic. An async agent's body runs on a worker thread with
an execution state of its own; its pause blocks that thread until ``resume``.
"""

from __future__ import annotations

from sensevm.base.errors import SenseError, SenseRuntimeError
from sensevm.guard.lifecycle import threads_start
from sensevm.guard.provenance import LABELLED, plain
from sensevm.runtime.values import AgentValue, type_name


def _error(message: str, located: bool = False) -> SenseRuntimeError:
    return SenseRuntimeError(message, located=located)


def running_agent(frame):
    """The running agent whose body lexically encloses the code running in ``frame``."""
    scope = frame.scope
    while scope is not None:
        tag = scope.tag
        if type(tag) is AgentValue and tag.status == "running":
            return tag
        scope = scope.parent
    return None


def _chain_length(top, base) -> int:
    n, frame = 1, top
    while frame is not base:
        frame = frame.caller
        n += 1
    return n


# ----------------------------------------------------------------------------- start / resume

def b_start(vm, frame, args):
    agent = args[0]
    if type(agent) is not AgentValue:
        raise _error(f"start() expects an Agent, got {type_name(agent)}")
    if agent.status != "created":
        raise _error(f"agent '{agent.name}' has already been started (status: {agent.status}) — "
                     "an agent can only be started once in this version")
    agent.status = "running"
    agent.pause_reason = None
    if agent.decl.is_async:
        try:
            _start_worker(vm, frame, agent)
        except SenseError:          # too deep, or too many workers: it never started
            agent.status, agent.base, agent.thread = "created", None, None
            raise
        frame.stack.append(agent)
        return False
    vm.enter_frames(1)
    agent.base = vm.new_frame(agent.body, agent.scope, frame, agent, "agent",
                              (f"agent:{agent.name}",))
    vm.frame = agent.base
    return True


def b_resume(vm, frame, args):
    if not 1 <= len(args) <= 2:
        raise _error("resume() expects 1 or 2 arguments (agent, value?)")
    agent = args[0]
    if type(agent) is not AgentValue:
        raise _error(f"resume() expects an Agent, got {type_name(agent)}")
    if agent.status != "paused":
        raise _error(f"cannot resume agent '{agent.name}' — status is '{agent.status}', "
                     "not 'paused'")
    value = args[1] if len(args) == 2 else None
    agent.pause_reason = None            # spec 21.7: nil once the agent runs again
    if agent.decl.is_async:
        with agent.cond:
            agent.resume_value = value
            agent.status = "running"
            agent.cond.notify_all()
        frame.stack.append(agent)
        return False
    agent.status = "running"
    vm.enter_frames(agent.frames)
    agent.base.caller = frame
    top, agent.top = agent.top, None
    top.stack.append(value)              # what the paused pause() returns
    vm.frame = top
    return True


# ----------------------------------------------------------------------------- pause / ask_human

def _pause(vm, frame, agent: AgentValue, reason):
    if agent.decl.is_async and agent.thread is not None and vm.worker_agent is agent:
        with agent.cond:
            agent.status = "paused"
            agent.pause_reason = reason
            agent.cond.notify_all()
            while agent.status == "paused":
                agent.cond.wait()
            value, agent.resume_value = agent.resume_value, None
        frame.stack.append(value)
        return False
    base = agent.base
    resumer = base.caller
    agent.frames = _chain_length(frame, base)
    agent.top = frame
    agent.status = "paused"
    agent.pause_reason = reason
    if vm.state_dir is not None:
        # Saved before anything is detached: a value that cannot be saved is an error at this
        # pause() call, with the agent still running, and no file is written.
        from sensevm.world.persist import save_agent
        try:
            save_agent(vm, agent, vm.state_dir)
        except SenseError:
            agent.status, agent.pause_reason, agent.top = "running", None, None
            raise
    base.caller = None
    vm.leave_frames(agent.frames)
    if resumer is None:
        vm.frame = None                  # a saved agent resumed on its own: the run ends here
        return True
    resumer.stack.append(agent)          # start()/resume() return the agent
    vm.frame = resumer
    return True


def b_pause(vm, frame, args):
    if len(args) > 1:
        raise _error("pause() expects 0 or 1 arguments (an optional reason)", located=True)
    agent = running_agent(frame)
    if agent is None:
        raise _error("pause() can only be called inside a running agent's body", located=True)
    return _pause(vm, frame, agent, args[0] if args else None)


def b_ask_human(vm, frame, args):
    question = args[0]
    if type(question) is not str:
        if type(question) in LABELLED:
            question = plain(question)
        else:
                raise _error(f"ask_human() expects a String question, got {type_name(question)}",
                         located=True)
    agent = running_agent(frame)
    if agent is not None:
        return _pause(vm, frame, agent, question)
    vm.write(question + "\n> ")
    flush = getattr(vm.out, "flush", None)
    if flush:
        flush()
    from sensevm.runtime.values import MAX_STRING, sized_string
    # One character more than a String may hold (its newline): a longer line is refused, and
    # never read whole into memory.
    line = vm.stdin.readline(MAX_STRING + 1) if vm.stdin is not None else ""
    if line == "":
        # The reference crashes here (spec 20 item 14); this is a clean error instead.
        raise _error("ask_human() reached the end of input: no answer to read")
    answer = sized_string(line[:-1] if line.endswith("\n") else line)
    if vm.look is not None:
        answer = vm.look.user_text(answer)      # the user's own words (the second look)
    frame.stack.append(answer)
    return False


# ----------------------------------------------------------------------------- messages

def b_send(vm, frame, args):
    agent, message = args
    if type(agent) is not AgentValue:
        raise _error(f"send() expects an Agent as its first argument, got {type_name(agent)}")
    with agent.cond:
        agent.mailbox.append(message)
        agent.cond.notify_all()
    frame.stack.append(None)
    return False


def b_receive(vm, frame, args):
    if len(args) > 1:
        raise _error("receive() expects 0 or 1 arguments (an optional timeout in seconds)",
                     located=True)
    agent = running_agent(frame)
    if agent is None:
        raise _error("receive() can only be called inside a running agent's body", located=True)
    timeout = None
    if args:
        timeout = plain(args[0])          # a number from a tool is a number
        if type(timeout) not in (int, float):
            raise _error(f"receive()'s timeout must be a number, got {type_name(timeout)}",
                         located=True)
        if timeout != timeout:
            raise _error("receive()'s timeout must be a number, got NaN", located=True)
        import threading
        if timeout > threading.TIMEOUT_MAX:
            timeout = None          # longer than the host can wait (OverflowError): no limit
    with agent.cond:
        if not agent.mailbox:
            agent.cond.wait_for(lambda: agent.mailbox, timeout=timeout)
        frame.stack.append(agent.mailbox.pop(0) if agent.mailbox else None)
    return False


# ----------------------------------------------------------------------------- async agents

def _start_worker(vm, frame, agent: AgentValue) -> None:
    import threading
    worker = vm.worker(1)
    worker.worker_agent = agent
    body = worker.new_frame(agent.body, agent.scope, None, agent, "agent",
                            (f"agent:{agent.name}",))
    body.origin = vm.snapshot(frame)
    agent.base = body
    worker.frame = body

    def run():
        try:
            worker._loop()
        except SenseError as err:
            agent.error = err
        except BaseException as exc:              # a VM bug must not vanish with the thread
            agent.error = SenseRuntimeError(f"internal error in async agent: {exc!r}",
                                            located=False)
        finally:
            workers.leave()         # first: a program that saw it end may start another
            with agent.cond:
                if agent.error is not None:
                    agent.status = "failed"
                elif agent.status == "running":
                    agent.status = "completed"
                agent.pause_reason = None
                agent.cond.notify_all()

    workers = vm.workers
    agent.thread = threading.Thread(target=run, name=f"sense-agent-{agent.name}", daemon=True)
    threads_start()
    workers.start(agent.thread)


def await_agent(vm, agent: AgentValue):
    if agent.status == "created":
        raise _error(f"cannot await agent '{agent.name}' — it hasn't been started yet",
                     located=True)
    if agent.thread is None:
        return agent                      # a plain agent has already stopped running
    with agent.cond:
        while agent.status == "running":
            agent.cond.wait()
    if agent.status == "failed" and agent.error is not None:
        raise agent.error
    return agent
