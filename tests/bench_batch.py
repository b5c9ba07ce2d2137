"""Batch mode at scale: `python tests/bench.py batch` sends 120,000 requests through the loopback fake of the
OpenAI files and batches endpoints (tests/batch_server.py), in batches of at most 50,000 requests.

A first client process uploads and creates the batches and is killed by SIGKILL while it polls them; a
second one resumes them, polls, downloads and caches every reply; a third (the rerun of a finished
evaluation) must find all in the cache. Figures: `batches` (goal >= 3), `lost` (prompts without a reply,
goal 0), `duplicated` (requests submitted or answered more than once, counted at the fake, goal 0),
`resumed` (the second client took over the killed one's batches and created none), `seconds` (client-side
work: CPU seconds of the two client processes after their imports; waiting costs none), `seconds_with_imports`, `wall_s` of each client, and the rerun's
calls (goal 0). Arguments: n, per_batch, duration (seconds a fake batch runs)."""
import json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path

import batch_client
from batch_server import serving

ROOT = Path(__file__).parents[1]

def _client(url:str,        # the fake's base URL
            cache:Path,     # the reply cache (and batch store) the client uses
            n:int,          # prompts
            per_batch:int   # the most requests in one batch
           )->subprocess.Popen:
    "A client process (tests/batch_client.py), its stdout piped"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')]))
    return subprocess.Popen([sys.executable, batch_client.__file__, url, str(cache), str(n), str(per_batch), '0.2'],
                            env=env, stdout=subprocess.PIPE, text=True)

def _cpu()->float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

def _kill_mid_poll(srv, proc, batches:int, timeout:float=600)->tuple[float, float]:
    "SIGKILL `proc` once it created `batches` batches and polled them twice over; (CPU seconds of its imports, its wall seconds)"
    imported = json.loads(proc.stdout.readline())['imported_cpu_s']
    t0, deadline = time.perf_counter(), time.time() + timeout
    while time.time() < deadline and not (srv.stats()['batches'] >= batches and
                                          srv.stats()['calls'].get('GET /v1/batches/{bid}', 0) >= 2 * batches):
        if proc.poll() is not None: raise RuntimeError('the first client ended before it could be killed mid-poll')
        time.sleep(0.05)
    proc.kill(); proc.wait()
    return imported, time.perf_counter() - t0

def _finish(proc)->tuple[dict, float]:
    "The JSON line of a client run to its end, and its wall seconds"
    t0 = time.perf_counter()
    out, _ = proc.communicate()
    if proc.returncode: raise RuntimeError(f'client failed with exit status {proc.returncode}')
    return json.loads(out.strip().splitlines()[-1]), time.perf_counter() - t0

def run(n=120_000, per_batch=50_000, duration=8.0, **_):
    n, per_batch = int(n), int(per_batch)
    expected = -(-n // per_batch)
    with serving(duration=float(duration)) as srv, tempfile.TemporaryDirectory() as d:
        url, cache, cpu0 = srv.url, Path(d)/'replies.sqlite', _cpu()
        killed = _client(url, cache, n, per_batch)
        killed_imports, killed_s = _kill_mid_poll(srv, killed, expected)
        killed_cpu, at_kill = _cpu() - cpu0, srv.stats()
        resumed, resumed_s = _finish(_client(url, cache, n, per_batch))
        with_imports, st = _cpu() - cpu0, srv.stats()
        calls = sum(st['calls'].values())
        rerun, rerun_s = _finish(_client(url, cache, n, per_batch))
        rerun_calls = sum(srv.stats()['calls'].values()) - calls
    r = resumed['run']
    return dict(n=n, batches=st['batches'], lost=n - resumed['answered'],
                duplicated=(st['submitted'] - st['unique']) + st['duplicated'],
                resumed=at_kill['billed'] == 0 and r['resumed'] == at_kill['batches'] and r['batches'] == 0,
                seconds=round(killed_cpu - killed_imports + resumed['work_cpu_s'], 2),
                seconds_with_imports=round(with_imports, 2), killed_after_s=round(killed_s, 2), resumed_wall_s=round(resumed_s, 2),
                rerun_calls=rerun_calls, rerun_cached=rerun['run']['cached'], rerun_wall_s=round(rerun_s, 2),
                batch_duration_s=float(duration), goal=dict(batches=3, lost=0, duplicated=0, resumed=True, rerun_calls=0),
                meets_goal=st['batches'] >= 3 and n == resumed['answered'] and st['submitted'] == st['unique'] == n
                           and st['duplicated'] == 0 and rerun_calls == 0)
