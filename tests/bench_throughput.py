"""Throughput of the batch runner against the fault server (no faults), through the SDK's own HTTP client.

`python tests/bench.py throughput` runs two figures, each followed by the same run again from the cache:
  scale  5,000 requests, server latency 1 s +- 0.3 s (uniform), 256 in flight: `ratio` (goal >= 0.95)
  old    2,000 requests, latency 0.1 s, 64 in flight: the figure before the scale issue (`old.ratio`, no goal)
ratio = achieved requests/s over the ideal concurrency / mean latency. No client reaches 1: when the
queue runs dry, slots fall idle one by one while the last requests finish; `ceiling` is the ratio of a
client with no overhead at all (the same run simulated, with the server's own latencies), and
`of_ceiling` = ratio / ceiling. The scale figure is measured `repeat` times, each against a fresh
server (the same latencies); `ratio` is their median and `ratios` lists them all, since the client's
share of two cores varies from run to run. `client=httpx` measures the SDK's default httpx client
instead of its aiohttp client (the runner's). Arguments: n, latency, jitter, concurrency, repeat
(scale run), old_n, old_latency, old_concurrency. Client and server share the machine's cores: the
server runs in its own process.

The clock starts once the process has paid its one-time costs, as a session has after its first
model call: the registry's first read (0.3 s, mostly the schema library's warm-up), the TLS context
(certifi's bundle, 30 ms) and the SDK's modules loaded on its first request. One request to the same
server pays them before the clock; `warmup_s` says how long it took (the server's latency included)."""
import heapq, tempfile, time
from pathlib import Path
from unittest import mock

import openai
from fault_server import FaultServer, start_process, get_stats
from orbench_ml import models
from orbench_ml.runner import run_batch

GOAL = 0.95
CLIENTS = {'aiohttp': models._http_client,
           'httpx': lambda concurrency, timeout: openai.DefaultAsyncHttpxClient(timeout=timeout, limits=models._hx.Limits(
               max_connections=concurrency, max_keepalive_connections=concurrency))}

def ceiling(n:int, latency:float, jitter:float, concurrency:int, skip:int=0)->float:
    "The ratio of a client with no overhead: each request takes the first free slot, the server's latency only"
    rng, free, end = FaultServer(latency=latency, jitter=jitter), [0.0] * concurrency, 0.0
    for _ in range(skip): rng.delay()   # the requests the server answered before the run (the warm-up)
    for _ in range(n):
        done = heapq.heappop(free) + rng.delay()
        end = max(end, done); heapq.heappush(free, done)
    return n / end / (concurrency / latency)

def _measure(n:int, latency:float, jitter:float, concurrency:int, progress:bool)->dict:
    "One run of `n` prompts, then the same again from the cache"
    proc, url = start_process(latency=latency, jitter=jitter, lifetime=600)
    try:
        with tempfile.TemporaryDirectory() as d:
            prompts = [f'throughput prompt number {i}' for i in range(n)]
            model = f'openai-compatible:bench-model@{url}/v1'
            kw = dict(cache=Path(d)/'replies.sqlite', concurrency=concurrency, progress=progress, timeout=30)
            t0 = time.perf_counter()
            run_batch(['warm-up'], model, cache=False, progress=False, timeout=30)   # the process's one-time costs
            warmup_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            first = run_batch(prompts, model, **kw)
            wall = time.perf_counter() - t0
            assert (first.finish_reason == 'stop').all(), first.finish_reason.value_counts()
            before = get_stats(url)['requests']
            t0 = time.perf_counter()
            again = run_batch(prompts, model, **kw)
            cached_s = time.perf_counter() - t0
            assert again.cached.all()
            cached_requests = get_stats(url)['requests'] - before
    finally:
        proc.terminate(); proc.wait()
    ideal, best = concurrency / latency, ceiling(n, latency, jitter, concurrency, skip=1)
    return dict(ratio=round(n / wall / ideal, 3), ceiling=round(best, 3), of_ceiling=round(n / wall / ideal / best, 3), requests_per_s=round(n / wall, 1), ideal_per_s=round(ideal, 1),
                wall_s=round(wall, 3), cached_seconds=round(cached_s, 3), cached_requests=cached_requests, warmup_s=round(warmup_s, 3), n=n,
                latency=latency, jitter=jitter, concurrency=concurrency)

def run(n=5000, latency=1.0, jitter=0.3, concurrency=256, repeat=3, old_n=2000, old_latency=0.1, old_concurrency=64,
        client='aiohttp', progress=False, **_):
    progress = str(progress) == 'True'
    with mock.patch.object(models, '_http_client', CLIENTS[client]):
        runs = [_measure(int(n), float(latency), float(jitter), int(concurrency), progress) for _ in range(int(repeat))]
        old = _measure(int(old_n), float(old_latency), 0.0, int(old_concurrency), progress)
    ratios = [r['ratio'] for r in runs]
    scale = sorted(runs, key=lambda r: r['ratio'])[(len(runs) - 1) // 2]   # the median run (the lower one of an even number)
    return dict(scale, ratios=ratios, goal=GOAL, meets_goal=scale['ratio'] >= GOAL, client=client, old=old)
