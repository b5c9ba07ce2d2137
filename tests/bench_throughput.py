"""Throughput of the batch runner against the fault server (no faults), through the SDK's own HTTP client.

`python tests/bench.py throughput` runs two figures, each followed by the same run again from the cache:
  scale  5,000 requests, server latency 1 s +- 0.3 s (uniform), 256 in flight: `ratio` (goal >= 0.95)
  old    2,000 requests, latency 0.1 s, 64 in flight: the figure before the scale issue (`old.ratio`, no goal)
ratio = achieved requests/s over the ideal concurrency / mean latency. No client reaches 1: when the
queue runs dry, slots fall idle one by one while the last requests finish; `ceiling` is the ratio of a
client with no overhead at all (the same run simulated), and `of_ceiling` = ratio / ceiling. `client=httpx` measures the SDK's
default httpx client instead of its aiohttp client (the runner's). Arguments: n, latency, jitter,
concurrency (scale run), old_n, old_latency, old_concurrency. Client and server share the machine's
cores: the server runs in its own process. The clock starts after the model registry's first read, a
one-time cost of a process (0.3 s, mostly the schema library's warm-up) that a session pays once."""
import heapq, random, tempfile, time
from pathlib import Path
from unittest import mock

import openai
from fault_server import start_process, get_stats
from orbench_ml import models
from orbench_ml.runner import run_batch

GOAL = 0.95
CLIENTS = {'aiohttp': models._http_client,
           'httpx': lambda concurrency, timeout: openai.DefaultAsyncHttpxClient(timeout=timeout, limits=models._hx.Limits(
               max_connections=concurrency, max_keepalive_connections=concurrency))}

def ceiling(n:int, latency:float, jitter:float, concurrency:int, seed:int=0)->float:
    "The ratio of a client with no overhead: each request takes the first free slot, the server's latency only"
    rng, free, end = random.Random(seed), [0.0] * concurrency, 0.0
    for _ in range(n):
        done = heapq.heappop(free) + latency + rng.uniform(-jitter, jitter)
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
            models.resolve(model)   # the registry's first read (0.3 s, once a process): before the clock, as in a session
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
    ideal, best = concurrency / latency, ceiling(n, latency, jitter, concurrency)
    return dict(ratio=round(n / wall / ideal, 3), ceiling=round(best, 3), of_ceiling=round(n / wall / ideal / best, 3), requests_per_s=round(n / wall, 1), ideal_per_s=round(ideal, 1),
                wall_s=round(wall, 3), cached_seconds=round(cached_s, 3), cached_requests=cached_requests, n=n,
                latency=latency, jitter=jitter, concurrency=concurrency)

def run(n=5000, latency=1.0, jitter=0.3, concurrency=256, old_n=2000, old_latency=0.1, old_concurrency=64,
        client='aiohttp', progress=False, **_):
    with mock.patch.object(models, '_http_client', CLIENTS[client]):
        scale = _measure(int(n), float(latency), float(jitter), int(concurrency), str(progress) == 'True')
        old = _measure(int(old_n), float(old_latency), 0.0, int(old_concurrency), str(progress) == 'True')
    return dict(scale, goal=GOAL, meets_goal=scale['ratio'] >= GOAL, client=client, old=old)
