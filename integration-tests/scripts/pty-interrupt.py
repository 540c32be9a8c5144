#!/usr/bin/env python3
"""Runs a command in a real pseudo-terminal, waits for a line saying it is ready, then types
the terminal's interrupt character (Ctrl-C) as a user would, and reports what happened.

The terminal driver turns the interrupt character into SIGINT for the whole foreground
process group, exactly as in an interactive shell (and under `npx`, npm forwards its own copy
to its child as well).

Usage: pty-interrupt.py STATE_FILE READY_TEXT TIMEOUT_S -- COMMAND [ARGS...]

Before the interrupt it records the pids of the mesh (from the `diffmesh up` state file: `up`
itself and every process it supervises, plus the nats-server listening on the mesh's NATS
port); after the command has exited it waits up
to 10 s for all of them to be gone. Prints one JSON object:
{"ready", "exit_code", "exit_signal", "seconds_to_exit", "pids", "left", "output"}.
"""
import json
import os
import pty
import select
import signal
import sys
import time


def read_some(fd, timeout):
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        return b''
    try:
        return os.read(fd, 65536)
    except OSError:
        return None  # EIO: the terminal's other side is closed


def pids_of_port(port):
    """Pids of processes with a listening TCP socket on 127.0.0.1:port (from /proc)."""
    inodes = set()
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    local, state, inode = parts[1], parts[3], parts[9]
                    if state == '0A' and int(local.split(':')[1], 16) == port:
                        inodes.add(inode)
        except OSError:
            pass
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            for fd in os.listdir(f'/proc/{pid}/fd'):
                target = os.readlink(f'/proc/{pid}/fd/{fd}')
                if target.startswith('socket:[') and target[8:-1] in inodes:
                    found.append(int(pid))
                    break
        except OSError:
            continue
    return found


def alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().split(')')[-1].split()[0] != 'Z'
    except OSError:
        return False


def main():
    state_file, ready_text, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    cmd = sys.argv[sys.argv.index('--') + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    out = b''
    ready = False
    deadline = time.time() + timeout
    while time.time() < deadline and not ready:
        chunk = read_some(fd, 0.5)
        if chunk is None:
            break
        out += chunk
        ready = ready_text.encode() in out
    pids = []
    if ready:
        try:
            with open(state_file) as f:
                state = json.load(f)
            pids = [state['pid']] + [p['pid'] for p in state.get('processes', [])]
            nats_port = int(state['natsUrl'].rsplit(':', 1)[1])
            pids += [p for p in pids_of_port(nats_port) if p not in pids]
        except (OSError, ValueError, KeyError):
            pass
        os.write(fd, b'\x03')  # the interrupt character: what Ctrl-C types
    t0 = time.time()
    status = None
    while time.time() - t0 < 30:
        chunk = read_some(fd, 0.2)
        if chunk:
            out += chunk
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            break
    if status is None:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    seconds = time.time() - t0
    # Whatever the command left behind has 10 s to go (npx returns before `up` has finished).
    left_deadline = time.time() + 10
    left = [p for p in pids if alive(p)]
    while left and time.time() < left_deadline:
        time.sleep(0.2)
        left = [p for p in pids if alive(p)]
    print(json.dumps({
        'ready': ready,
        'exit_code': os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        'exit_signal': os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        'seconds_to_exit': round(seconds, 2),
        'pids': pids,
        'left': left,
        'output': out.decode('utf-8', 'replace')[-4000:],
    }))


if __name__ == '__main__':
    main()
