"""A Spark standalone cluster on this machine, and Spark's history server, from the project's own
PySpark installation: ``python -m runtime.cluster up|down|status|history|history-down``
(``make cluster-up`` and friends).

``up`` starts one master and N workers as separate daemons (``spark-class`` subprocesses), all
bound to 127.0.0.1, each worker with its own work and scratch folders under
``scratch/cluster/`` and a share of the cores and memory, waits until every worker has
registered, and records the daemons' process ids and the master URL in
``scratch/cluster/cluster.json``. ``spark=standalone`` uses that URL when ``$SPARK_MASTER_URL``
is unset (:func:`runtime.spark_session.resolve_master`). ``down`` stops exactly the processes
it recorded, after checking each pid still runs the daemon it started.

The executors get the project's code as a real cluster's do: only through the zip the driver
ships (:mod:`runtime.shipping`). The workers run outside the checkout with no project folder on
their ``PYTHONPATH``, and the executors' Python is a *node Python*: a virtual environment that
sees the project's dependencies but not the project (the project's own environment may put the
checkout on its path, as ``make setup`` does).

The history server serves the event logs every session writes (``scratch/spark-events``).
``SKEWJOINS_CLUSTER_DIR`` moves the state folder (the tests use their own).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime.paths import ROOT, SCRATCH, SPARK_EVENTS

DIR_ENV = "SKEWJOINS_CLUSTER_DIR"
HOST = "127.0.0.1"
STATE = "cluster.json"
HISTORY_STATE = "history.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
HISTORY_CLASS = "org.apache.spark.deploy.history.HistoryServer"
DAEMON_MEMORY = "512m"  # heap of each daemon (master, worker, history server), not executors
LOG_TAIL = 15


class ClusterError(RuntimeError):
    """A cluster command that cannot do what was asked; ``code`` is the CLI's exit status."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def cluster_dir() -> Path:
    return Path(os.environ.get(DIR_ENV) or SCRATCH / "cluster").absolute()


# --- processes ------------------------------------------------------------------------------

def _cmdline(pid: int) -> str | None:
    """The command line of a running process (None if there is none)."""
    proc = Path(f"/proc/{pid}/cmdline")
    if proc.parent.is_dir():
        try:
            return proc.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return None
    try:  # no /proc (macOS)
        out = subprocess.run(["ps", "-ww", "-o", "command=", "-p", str(pid)], text=True,
                             capture_output=True)
    except OSError:
        return None
    return out.stdout.strip() or None


def _marker(home: Path) -> str:
    """A JVM option naming the state folder: a recorded pid is ours only if it carries it."""
    return f"-Dskewjoins.cluster={home}"


def is_ours(daemon: Mapping[str, Any], home: Path) -> bool:
    """Whether the recorded daemon still runs: same pid, same Spark class, and our marker (or,
    for the first second, the ``spark-class`` script that then becomes the JVM)."""
    cmd = _cmdline(int(daemon["pid"]))
    if cmd == "":  # a zombie, or a process in the middle of exec: look again
        time.sleep(0.1)
        cmd = _cmdline(int(daemon["pid"]))
    if cmd is None or daemon["class"] not in cmd:
        return False
    return _marker(home) in cmd or "bin/spark-class " in cmd


# the daemons this process started: while it runs, their liveness is the child's own exit status,
# free of the moment /proc shows no command line (a process in the middle of exec)
_children: dict[int, subprocess.Popen] = {}


def _alive(daemon: Mapping[str, Any], home: Path) -> bool:
    child = _children.get(int(daemon["pid"]))
    return child.poll() is None if child is not None else is_ours(daemon, home)


def _spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(os.environ.get("SPARK_HOME") or _find_spark_home())


def _daemon_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a daemon (and so of a worker's executors): this one without the
    checkout on PYTHONPATH and without this driver's Python settings."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_MASTER_URL",
                        "SPARK_LOCAL_DIRS", DIR_ENV)}
    root = str(ROOT)
    kept = [p for p in env.pop("PYTHONPATH", "").split(os.pathsep)
            if p and p != "." and not str(Path(p).absolute()).startswith(root)]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    env.update(SPARK_HOME=str(_spark_home()), SPARK_LOCAL_IP=HOST,
               SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
               SPARK_DAEMON_JAVA_OPTS=f"{_marker(home)} -Dspark.port.maxRetries=0")
    env.update(extra)
    return env


def _launch(home: Path, name: str, cls: str, args: list[str], env: Mapping[str, str]) -> dict:
    log = home / f"{name}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-class"), cls, *args], env=dict(env),
            cwd=tempfile.gettempdir(),  # outside the checkout: nothing importable from cwd
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)  # outlives this command; Ctrl-C here does not reach it
    _children[proc.pid] = proc
    return {"name": name, "class": cls, "pid": proc.pid, "log": str(log)}


def _stop(daemons: list[dict], home: Path, grace_s: float = 15.0) -> list[str]:
    """SIGTERM each recorded daemon still ours, wait, SIGKILL stragglers; the names stopped."""
    live = [d for d in daemons if _alive(d, home)]
    for d in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(d["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(d, home) for d in live):
        time.sleep(0.2)
    for d in live:
        if _alive(d, home):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(d["pid"]), signal.SIGKILL)
            child = _children.get(int(d["pid"]))
            if child is not None:
                child.wait(10)
    return [d["name"] for d in live]


def _log_tail(daemon: Mapping[str, Any], lines: int = LOG_TAIL) -> str:
    try:
        text = Path(daemon["log"]).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        text = ["(no log)"]
    return f"--- {daemon['log']} (last {len(text)} lines)\n" + "\n".join(text)


# --- ports, sizes ----------------------------------------------------------------------------

def port_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port free on the loopback address now (for tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _require_free(ports: Mapping[str, int], option_of: Mapping[str, str]) -> None:
    for what, port in ports.items():
        if not port_free(port):
            raise ClusterError(f"port {port} on {HOST} ({what}) is busy; free it or choose "
                               f"another with {option_of[what]}", code=2)


def memory_mb(text: str | int) -> int:
    """Spark's memory notation (``2g``, ``1536m``, ``512k``; a bare number is MiB) in MiB."""
    s = str(text).strip().lower().removesuffix("b")
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    if s and s[-1] in units:
        return int(float(s[:-1]) * units[s[-1]])
    return int(s)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _default_cores(workers: int) -> int:
    return max(1, (os.cpu_count() or 2) // workers)


def _default_memory_mb(cores: int, workers: int) -> int:
    """2 GB per core (local_cluster's executors have as much), at most half of this machine's
    memory over all workers, at least 1 GB."""
    try:
        ram_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):
        ram_mb = 8192
    return max(1024, min(2048 * cores, ram_mb // 2 // workers))


# --- the node Python -------------------------------------------------------------------------

def node_python(home: Path) -> Path:
    """A virtual environment whose path holds the project's dependencies (this interpreter's
    site-packages, added as plain folders so their ``.pth`` files, such as the one ``make
    setup`` writes to put the checkout on the path, are not run) but not the project: the
    Python a cluster node has. Built once per state folder, in a second."""
    venv = home / "node-python"
    python = venv / "bin" / "python"
    pth = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" \
        / "site-packages" / "project-dependencies.pth"
    import site

    deps = [p for p in dict.fromkeys(site.getsitepackages()) if Path(p).is_dir()]
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                       capture_output=True)
    pth.parent.mkdir(parents=True, exist_ok=True)
    pth.write_text("".join(f"{p}\n" for p in deps))
    _link_native_tools(Path(sys.executable).parent, venv / "bin")
    return python


def _link_native_tools(source: Path, dest: Path) -> None:
    """The dependencies' native executables (tpchgen-cli, which the TPC-H generator's tasks run
    from beside their Python), linked into the node Python's ``bin``, as installing the
    requirements on a node puts them there. Script entry points are not linked: their first
    line names this environment's Python, which sees the checkout."""
    for tool in source.iterdir():
        target = dest / tool.name
        if target.exists() or not tool.is_file() or not os.access(tool, os.X_OK):
            continue
        with open(tool, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        target.symlink_to(tool.resolve())


# --- state -----------------------------------------------------------------------------------

def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def read_state(home: Path | None = None) -> dict | None:
    return _read((home or cluster_dir()) / STATE)


def running_cluster(home: Path | None = None) -> dict | None:
    """The recorded cluster if its master still runs, else None."""
    home = home or cluster_dir()
    state = read_state(home)
    if state and is_ours(state["daemons"][0], home):
        return state
    return None


def running_master_url(home: Path | None = None) -> str | None:
    state = running_cluster(home)
    return state["master_url"] if state else None


def _json(url: str, timeout: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (loopback only)
        return json.loads(resp.read())


def alive_workers(state: Mapping[str, Any]) -> int | None:
    """How many workers the master counts alive (None if its web UI does not answer)."""
    try:
        info = _json(f"{state['webui']}/json/")
    except (OSError, ValueError):
        return None
    return sum(1 for w in info.get("workers", []) if w.get("state") == "ALIVE")


# --- up / down / status ----------------------------------------------------------------------

def up(workers: int = 2, cores: int | None = None, memory: str | None = None, port: int = 7077,
       webui_port: int = 8080, worker_webui_port: int = 8081, timeout_s: float = 180.0,
       home: Path | None = None, say=print) -> dict:
    """Start the cluster (or say it runs already) and return its state."""
    home = home or cluster_dir()
    home.mkdir(parents=True, exist_ok=True)
    state = read_state(home)
    if state:
        live = [d for d in state["daemons"] if is_ours(d, home)]
        if len(live) == len(state["daemons"]):
            say(f"a cluster is up already: {state['master_url']} (web UI {state['webui']}); "
                "left as it is (make cluster-down stops it)")
            return state
        if live:
            gone = ", ".join(d["name"] for d in state["daemons"] if d not in live)
            raise ClusterError(f"the cluster recorded in {home / STATE} is half up ({gone} not "
                               "running); make cluster-down stops the rest, then make cluster-up")
        (home / STATE).unlink()  # every daemon is gone (machine restarted, killed): start anew
    if workers < 1:
        raise ClusterError("--workers must be at least 1", code=2)
    cores = cores or _default_cores(workers)
    mem_mb = memory_mb(memory) if memory else _default_memory_mb(cores, workers)
    ports = {"master": port, "master web UI": webui_port,
             **{f"worker-{i + 1} web UI": worker_webui_port + i for i in range(workers)}}
    option_of = {"master": "--port", "master web UI": "--webui-port",
                 **{k: "--worker-webui-port" for k in ports if k.startswith("worker")}}
    _require_free(ports, option_of)

    python = node_python(home)
    url, webui = f"spark://{HOST}:{port}", f"http://{HOST}:{webui_port}"
    state = {"master_url": url, "webui": webui, "python": str(python), "workers": workers,
             "worker_cores": cores, "worker_memory_mb": mem_mb, "daemons": [],
             "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    empty = _daemon_env(home, {})
    try:
        state["daemons"].append(_launch(
            home, "master", MASTER_CLASS,
            ["--host", HOST, "--port", str(port), "--webui-port", str(webui_port)],
            {**empty, "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}))
        _write(home / STATE, state)
        for i in range(workers):
            name, wdir = f"worker-{i + 1}", home / f"worker-{i + 1}"
            (wdir / "work").mkdir(parents=True, exist_ok=True)
            (wdir / "local").mkdir(parents=True, exist_ok=True)
            env = _daemon_env(home, {"SPARK_LOCAL_DIRS": str(wdir / "local")})
            state["daemons"].append(_launch(
                home, name, WORKER_CLASS,
                ["--host", HOST, "--cores", str(cores), "--memory", f"{mem_mb}m",
                 "--work-dir", str(wdir / "work"), "--webui-port",
                 str(worker_webui_port + i), url], env))
            _write(home / STATE, state)
        _wait_for_workers(state, home, timeout_s)
    except BaseException:
        _stop(state["daemons"], home)
        with contextlib.suppress(OSError):
            (home / STATE).unlink()
        raise
    say(f"Spark standalone cluster up: {url}, {_count(workers, 'worker')} x "
        f"{_count(cores, 'core')} x {mem_mb} MiB")
    say(f"master web UI: {webui}")
    say("spark=standalone uses it while $SPARK_MASTER_URL is unset; make cluster-down stops it")
    return state


def _wait_for_workers(state: dict, home: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    alive = None
    while time.monotonic() < deadline:
        dead = [d for d in state["daemons"] if not _alive(d, home)]
        if dead:
            raise ClusterError(f"{dead[0]['name']} exited while the cluster started\n"
                               + "\n".join(_log_tail(d) for d in dead))
        alive = alive_workers(state)
        if alive == state["workers"]:
            return
        time.sleep(0.5)
    raise ClusterError(
        f"{state['workers']} workers did not register with {state['master_url']} within "
        f"{timeout_s:.0f} s ({alive if alive is not None else 'no answer from the master; 0'} "
        "registered)\n" + "\n".join(_log_tail(d) for d in state["daemons"]))


def down(home: Path | None = None, say=print) -> list[str]:
    """Stop the daemons ``up`` recorded (only those still running what it started)."""
    home = home or cluster_dir()
    state = read_state(home)
    if not state:
        say("no cluster is up (nothing recorded in " f"{home / STATE})")
        return []
    stopped = _stop(state["daemons"], home)
    (home / STATE).unlink()
    say(f"stopped {', '.join(stopped)}" if stopped else
        "the recorded cluster was not running any more; forgot it")
    return stopped


def status(home: Path | None = None, say=print) -> bool:
    """Say what runs; True if the cluster is fully up."""
    home = home or cluster_dir()
    state, full = read_state(home), False
    if not state:
        say("cluster: not up (make cluster-up starts one)")
    else:
        live = [d for d in state["daemons"] if is_ours(d, home)]
        full = len(live) == len(state["daemons"])
        alive = alive_workers(state) if live else None
        say(f"cluster: {'up' if full else 'half up' if live else 'down (stale record)'} "
            f"{state['master_url']}, web UI {state['webui']}, "
            f"workers alive: {alive if alive is not None else 'unknown'}/{state['workers']} "
            f"({_count(state['worker_cores'], 'core')} x {state['worker_memory_mb']} MiB each)")
        for d in state["daemons"]:
            say(f"  {d['name']:<10} pid {d['pid']:<8} "
                f"{'running' if d in live else 'not running'}  log {d['log']}")
    hist = _read(home / HISTORY_STATE)
    if hist:
        on = is_ours(hist["daemons"][0], home)
        say(f"history server: {'up' if on else 'down (stale record)'} {hist['webui']} "
            f"(pid {hist['daemons'][0]['pid']}, event logs {hist['event_logs']})")
    else:
        say("history server: not up (make history starts it)")
    return full


# --- session settings on the recorded cluster ------------------------------------------------

def fit_session(url: str, conf: Mapping[str, str], home: Path | None = None) -> dict | None:
    """When ``url`` is the running cluster ``up`` started: the settings a session needs there,
    else None. Executors are sized to the workers (``spark.executor.cores`` and ``.memory``
    capped so that every worker core gets an executor: a preset's 7g executors would never be
    granted on 2 GB workers, and the application would wait for ever), the driver listens on the
    loopback address, and ``python`` is the node Python for ``PYSPARK_PYTHON``."""
    state = running_cluster(home)
    if not state or state["master_url"] != url:
        return None
    cores = min(int(conf.get("spark.executor.cores", 1)), int(state["worker_cores"]))
    share = int(state["worker_memory_mb"]) * cores // int(state["worker_cores"])
    asked = memory_mb(conf.get("spark.executor.memory", "1g"))
    return {"conf": {"spark.executor.cores": str(cores),
                     "spark.executor.memory": f"{min(asked, share)}m",
                     "spark.driver.host": HOST, "spark.driver.bindAddress": HOST},
            "python": state["python"]}


# --- history server --------------------------------------------------------------------------

def history(port: int = 18080, timeout_s: float = 120.0, home: Path | None = None,
            say=print) -> dict:
    """Start Spark's history server on the project's event logs (or say it runs already)."""
    home = home or cluster_dir()
    home.mkdir(parents=True, exist_ok=True)
    hist = _read(home / HISTORY_STATE)
    if hist and is_ours(hist["daemons"][0], home):
        say(f"the history server is up already: {hist['webui']} (make history-down stops it)")
        return hist
    _require_free({"history server": port}, {"history server": "--port"})
    SPARK_EVENTS.mkdir(parents=True, exist_ok=True)
    opts = (f"-Dspark.history.fs.logDirectory=file://{SPARK_EVENTS} "
            f"-Dspark.history.ui.port={port} -Dspark.history.fs.update.interval=5s")
    daemon = _launch(home, "history", HISTORY_CLASS, [],
                     _daemon_env(home, {"SPARK_HISTORY_OPTS": opts}))
    hist = {"webui": f"http://{HOST}:{port}", "event_logs": str(SPARK_EVENTS),
            "daemons": [daemon]}
    _write(home / HISTORY_STATE, hist)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            if not _alive(daemon, home):
                raise ClusterError("the history server exited while starting\n"
                                   + _log_tail(daemon))
            try:
                apps = _json(f"{hist['webui']}/api/v1/applications")
                break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"the history server did not answer within {timeout_s:.0f} s"
                                   "\n" + _log_tail(daemon))
            time.sleep(0.5)
    except BaseException:
        _stop([daemon], home)
        (home / HISTORY_STATE).unlink()
        raise
    say(f"Spark history server: {hist['webui']} ({len(apps)} applications so far, from "
        f"{SPARK_EVENTS}); make history-down stops it")
    return hist


def history_down(home: Path | None = None, say=print) -> list[str]:
    home = home or cluster_dir()
    hist = _read(home / HISTORY_STATE)
    if not hist:
        say("no history server is up")
        return []
    stopped = _stop(hist["daemons"], home)
    (home / HISTORY_STATE).unlink()
    say("stopped the history server" if stopped else
        "the recorded history server was not running any more; forgot it")
    return stopped


# --- command line ----------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m runtime.cluster",
        description="A Spark standalone cluster and history server on this machine.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="start a master and workers (make cluster-up)")
    p_up.add_argument("--workers", type=int, default=2)
    p_up.add_argument("--cores", type=int, default=None,
                      help="cores per worker (default: this machine's cores / workers)")
    p_up.add_argument("--memory", default=None,
                      help="memory per worker, e.g. 4g (default: 2g per core, at most half of "
                           "this machine's memory over all workers)")
    p_up.add_argument("--port", type=int, default=7077, help="master port")
    p_up.add_argument("--webui-port", type=int, default=8080, help="master web UI port")
    p_up.add_argument("--worker-webui-port", type=int, default=8081,
                      help="first worker's web UI port (the next workers count up)")
    p_up.add_argument("--timeout", type=float, default=180.0,
                      help="seconds to wait for the workers to register")
    sub.add_parser("down", help="stop the daemons up started (make cluster-down)")
    sub.add_parser("status", help="what runs (make cluster-status)")
    p_hist = sub.add_parser("history", help="start the history server (make history)")
    p_hist.add_argument("--port", type=int, default=18080)
    sub.add_parser("history-down", help="stop the history server (make history-down)")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            up(args.workers, args.cores, args.memory, args.port, args.webui_port,
               args.worker_webui_port, args.timeout)
        elif args.command == "down":
            down()
        elif args.command == "status":
            status()
        elif args.command == "history":
            history(args.port)
        else:
            history_down()
    except ClusterError as exc:
        print(f"cluster: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("cluster: interrupted; stopped what had started", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
