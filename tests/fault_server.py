"""A fault-injecting model server for tests: OpenAI-compatible (`POST /v1/chat/completions`) and
Gemini-shaped (`POST /v1beta/models/<m>:generateContent`), on 127.0.0.1 only, bounded (it stops by
itself after `lifetime` seconds or `max_requests` requests, or when its parent process dies).

It is a raw asyncio HTTP/1.1 server (keep-alive, Content-Length bodies) so that it stays lean: the
benchmarks run client and server on the same two cores.

Every answer waits `latency` seconds, plus or minus up to `jitter` (uniform, seeded). With `slots` > 0 the
server works on at most that many requests at a time and queues the rest, like a GPU server with a batch
limit: its capacity is `slots / latency` requests per second however many arrive.

Faults, drawn at random per request with the given rates, or forced by a directive in the prompt:
`[[fault:KIND]]` (every time) or `[[fault:KIND*N]]` (the first N requests of that prompt only).
KIND is one of 429 (with Retry-After), 500, timeout (hangs, then closes), drop (closes the connection
without a reply), malformed (200 with broken JSON), filter (OpenAI content-filter stop / Gemini
safety block), promptblock (Gemini prompt blocked), 401 (echoes the key it was given, as some
providers do: the client must redact it).

    python tests/fault_server.py --latency 1 --jitter 0.3 --faults 429=0.05,500=0.05,drop=0.05,malformed=0.05
prints one JSON line {"url": ..., "port": ...} and serves. `GET /stats` returns the counts.
"""
from __future__ import annotations
import argparse, asyncio, json, os, random, re, socket, sys, threading, time
from collections import Counter, defaultdict

KINDS = ('429', '500', 'timeout', 'drop', 'malformed', 'filter', 'promptblock', '401')
_DIRECTIVE = re.compile(r'\[\[fault:([a-z0-9]+)(?:\*(\d+))?\]\]')
_REASONS = {200: 'OK', 400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 429: 'Too Many Requests',
            500: 'Internal Server Error'}


class FaultServer:
    "The server's state and behaviour; `serve()` runs it on the current event loop"
    def __init__(self, port:int=0, latency:float=0.0, faults:dict|None=None, retry_after:float=1.0,
                 retry_after_ms:int|None=None, hang:float=30.0, lifetime:float=600.0, max_requests:int=1_000_000,
                 seed:int=0, reply_words:int=8, jitter:float=0.0, slots:int=0):
        self.port, self.latency, self.jitter, self.faults = port, latency, jitter, dict(faults or {})
        self.retry_after, self.retry_after_ms, self.hang = retry_after, retry_after_ms, hang
        self.lifetime, self.max_requests, self.reply_words, self.slots = lifetime, max_requests, reply_words, slots
        self.gate = None                               # an asyncio.Semaphore of `slots`, made on the server's loop
        bad = set(self.faults) - set(KINDS)
        if bad: raise ValueError(f'unknown fault kinds {bad}; expected {KINDS}')
        self.rng = random.Random(seed)
        self.jitter_rng = random.Random(seed + 1)     # its own stream: jitter does not change which faults are drawn
        self.requests, self.answered = 0, 0
        self.kinds = Counter()
        self.by_prompt = defaultdict(lambda: [0, 0])  # prompt -> [requests, answers]
        self.keys = Counter()                          # key presented -> requests (test keys only)
        self.inflight = self.max_inflight = 0
        self.started = time.monotonic()
        self._stop = None

    # -- behaviour ------------------------------------------------------------------------------
    def fault_for(self, prompt:str)->str|None:
        "The fault to inject for this request of `prompt` (its request count already incremented)"
        m = _DIRECTIVE.search(prompt)
        if m:
            n = int(m.group(2)) if m.group(2) else None
            if n is None or self.by_prompt[prompt][0] <= n: return m.group(1)
            return None
        r, acc = self.rng.random(), 0.0
        for kind, rate in self.faults.items():
            acc += rate
            if r < acc: return kind
        return None

    def delay(self)->float:
        "Seconds to wait before this answer"
        return max(0.0, self.latency + (self.jitter_rng.uniform(-self.jitter, self.jitter) if self.jitter else 0.0))

    def reply_text(self, prompt:str)->str:
        words = re.sub(r'\[\[.*?\]\]', '', prompt).split()
        return ' '.join(['Reply', 'to:', *words][:self.reply_words])

    def stats(self)->dict:
        return dict(requests=self.requests, answered=self.answered, kinds=dict(self.kinds), keys=dict(self.keys),
                    max_inflight=self.max_inflight, prompts={p: v for p, v in self.by_prompt.items()},
                    uptime_s=round(time.monotonic()-self.started, 3))

    # -- HTTP -----------------------------------------------------------------------------------
    async def handle(self, reader:asyncio.StreamReader, writer:asyncio.StreamWriter):
        try:
            while True:
                try: head = await reader.readuntil(b'\r\n\r\n')
                except (asyncio.IncompleteReadError, ConnectionError): return
                lines = head.decode('latin-1').split('\r\n')
                method, path, _ = lines[0].split(' ', 2)
                headers = {}
                for line in lines[1:]:
                    if ':' in line:
                        k, v = line.split(':', 1); headers[k.strip().lower()] = v.strip()
                n = int(headers.get('content-length', 0) or 0)
                body = await reader.readexactly(n) if n else b''
                out = await self.route(method, path, headers, body)
                if out is None: return  # drop / timeout: close without a reply
                status, payload, extra = out
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                hdr = [f'HTTP/1.1 {status} {_REASONS.get(status, "Error")}', 'Content-Type: application/json',
                       f'Content-Length: {len(data)}', *[f'{k}: {v}' for k, v in extra.items()]]
                writer.write(('\r\n'.join(hdr) + '\r\n\r\n').encode() + data)
                await writer.drain()
                if self.requests >= self.max_requests: self._stop.set()
        except (ConnectionError, asyncio.IncompleteReadError): pass
        finally:
            try: writer.close()
            except Exception: pass

    async def route(self, method, path, headers, body):
        path = path.split('?', 1)[0]
        if method == 'GET' and path == '/stats': return 200, self.stats(), {}
        if method == 'POST' and path == '/reset':
            self.requests = self.answered = self.max_inflight = 0
            self.kinds.clear(); self.by_prompt.clear(); self.keys.clear()
            return 200, {'ok': True}, {}
        if method == 'GET' and path.rstrip('/').endswith('/models'):
            return 200, {'object': 'list', 'data': [{'id': 'fault-model', 'object': 'model', 'owned_by': 'tests'}]}, {}
        if method == 'GET' and '/models/' in path:
            m = path.rsplit('/', 1)[1]
            return 200, {'name': f'models/{m}', 'displayName': m, 'inputTokenLimit': 1_000_000}, {}
        if method == 'POST' and (path.endswith('/chat/completions') or path.endswith(':generateContent')):
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            try:
                if path.endswith('/chat/completions'): return await self.chat(headers, body, 'openai')
                return await self.chat(headers, body, 'gemini', model=path.rsplit('/', 1)[1].split(':')[0])
            finally: self.inflight -= 1
        return 404, {'error': {'message': f'no route {method} {path}'}}, {}

    async def chat(self, headers, body, shape, model=None):
        try: req = json.loads(body)
        except ValueError: return 400, {'error': {'message': 'body is not JSON'}}, {}
        if shape == 'openai':
            msgs = req.get('messages', [])
            prompt = next((m['content'] for m in reversed(msgs) if m.get('role') == 'user'), '')
            max_tokens = req.get('max_tokens') or req.get('max_completion_tokens') or 10**6
            model = req.get('model', '')
            n_in = sum(len(str(m.get('content', '')).split()) for m in msgs)
        else:
            parts = (req.get('contents') or [{}])[-1].get('parts', [])
            prompt = ' '.join(p.get('text', '') for p in parts)
            max_tokens = (req.get('generationConfig') or {}).get('maxOutputTokens') or 10**6
            sys_parts = (req.get('systemInstruction') or {}).get('parts', [])
            n_in = len(prompt.split()) + sum(len(p.get('text', '').split()) for p in sys_parts)
        self.requests += 1
        self.by_prompt[prompt][0] += 1
        key = headers.get('authorization', '').removeprefix('Bearer ') or headers.get('x-goog-api-key', '')
        self.keys[key] += 1
        fault = self.fault_for(prompt)
        self.kinds[fault or 'ok'] += 1
        if fault == 'drop': return None
        if fault == 'timeout':
            await asyncio.sleep(self.hang); return None
        if self.latency:
            if self.gate is None: await asyncio.sleep(self.delay())
            else:
                async with self.gate: await asyncio.sleep(self.delay())
        if fault == '429':
            extra = {'Retry-After': f'{self.retry_after:g}'}
            if self.retry_after_ms is not None: extra['retry-after-ms'] = str(self.retry_after_ms)
            return 429, self.error(shape, 429, 'Rate limit reached, retry later', 'RESOURCE_EXHAUSTED'), extra
        if fault == '500': return 500, self.error(shape, 500, 'Internal error, please retry', 'INTERNAL'), {}
        if fault == '401':
            return 401, self.error(shape, 401, f'Incorrect API key provided: {key}', 'UNAUTHENTICATED'), {}
        if fault == 'malformed': return 200, b'{"id": "x", "choices": [{"message": {"content": "trunc', {}
        words = self.reply_text(prompt).split()
        finish = 'stop'
        if len(words) > max_tokens: words, finish = words[:max_tokens], 'length'
        text, n_out = ' '.join(words), len(words)
        self.answered += 1
        self.by_prompt[prompt][1] += 1
        if shape == 'openai':
            if fault == 'filter': text, finish, n_out = None, 'content_filter', 0
            return 200, {'id': f'chatcmpl-{self.requests}', 'object': 'chat.completion', 'created': int(time.time()),
                         'model': model, 'choices': [{'index': 0, 'message': {'role': 'assistant', 'content': text},
                                                      'finish_reason': finish}],
                         'usage': {'prompt_tokens': n_in, 'completion_tokens': n_out, 'total_tokens': n_in + n_out}}, {}
        usage = {'promptTokenCount': n_in, 'candidatesTokenCount': n_out, 'totalTokenCount': n_in + n_out}
        if fault == 'promptblock':
            return 200, {'promptFeedback': {'blockReason': 'SAFETY'}, 'usageMetadata': {'promptTokenCount': n_in},
                         'modelVersion': model}, {}
        if fault == 'filter':
            return 200, {'candidates': [{'finishReason': 'SAFETY', 'index': 0, 'safetyRatings': [
                {'category': 'HARM_CATEGORY_DANGEROUS_CONTENT', 'probability': 'HIGH', 'blocked': True}]}],
                'usageMetadata': {'promptTokenCount': n_in, 'totalTokenCount': n_in}, 'modelVersion': model}, {}
        return 200, {'candidates': [{'content': {'role': 'model', 'parts': [{'text': text}]}, 'index': 0,
                                     'finishReason': 'STOP' if finish == 'stop' else 'MAX_TOKENS'}],
                     'usageMetadata': usage, 'modelVersion': model}, {}

    @staticmethod
    def error(shape, code, message, status):
        if shape == 'openai': return {'error': {'message': message, 'type': 'server_error', 'code': code}}
        return {'error': {'code': code, 'message': message, 'status': status}}

    # -- lifecycle ------------------------------------------------------------------------------
    async def serve(self, ready=None):
        self._stop = asyncio.Event()
        if self.slots: self.gate = asyncio.Semaphore(self.slots)
        server = await asyncio.start_server(self.handle, '127.0.0.1', self.port, backlog=1024)
        self.port = server.sockets[0].getsockname()[1]
        if ready: ready(self)
        parent = os.getppid()
        deadline = time.monotonic() + self.lifetime
        async with server:
            while not self._stop.is_set() and time.monotonic() < deadline and os.getppid() == parent:
                try: await asyncio.wait_for(self._stop.wait(), 0.5)
                except asyncio.TimeoutError: pass
        server.close()

    @property
    def url(self)->str: return f'http://127.0.0.1:{self.port}'

    def start_thread(self)->'FaultServer':
        "Serve from a daemon thread of this process; returns once the port is bound"
        ev = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self.serve(lambda s: ev.set())), daemon=True)
        self._thread.start()
        if not ev.wait(10): raise RuntimeError('fault server did not start')
        return self

    def stop(self):
        if self._stop is not None: self._stop._loop.call_soon_threadsafe(self._stop.set)


def parse_faults(spec:str)->dict:
    "'429=0.05,500=0.05' -> {'429': 0.05, '500': 0.05}"
    return {k: float(v) for k, v in (p.split('=') for p in spec.split(',') if p)} if spec else {}


def start_process(**cfg):
    "Start the server in its own process (own core, own GIL); returns (Popen, base url)"
    import subprocess
    args = [sys.executable, __file__]
    for k, v in cfg.items():
        if k == 'faults': v = ','.join(f'{a}={b}' for a, b in v.items())
        args += [f'--{k.replace("_", "-")}', str(v)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line: raise RuntimeError(f'fault server did not start: {args}')
    return proc, json.loads(line)['url']


def get_stats(url:str)->dict:
    import urllib.request
    with urllib.request.urlopen(f'{url}/stats', timeout=10) as r: return json.loads(r.read())


def reset(url:str):
    import urllib.request
    urllib.request.urlopen(urllib.request.Request(f'{url}/reset', method='POST', data=b''), timeout=10).read()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--port', type=int, default=0)
    p.add_argument('--latency', type=float, default=0.0)
    p.add_argument('--jitter', type=float, default=0.0)
    p.add_argument('--faults', default='', help='KIND=RATE,... with KIND in ' + ' '.join(KINDS))
    p.add_argument('--retry-after', type=float, default=1.0)
    p.add_argument('--retry-after-ms', type=int, default=None)
    p.add_argument('--hang', type=float, default=30.0)
    p.add_argument('--lifetime', type=float, default=600.0)
    p.add_argument('--max-requests', type=int, default=1_000_000)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--slots', type=int, default=0, help='requests worked on at a time (0: no limit)')
    a = p.parse_args(argv)
    srv = FaultServer(a.port, a.latency, parse_faults(a.faults), a.retry_after, a.retry_after_ms, a.hang,
                      a.lifetime, a.max_requests, a.seed, jitter=a.jitter, slots=a.slots)
    def ready(s): print(json.dumps({'url': s.url, 'port': s.port}), flush=True)
    try: asyncio.run(srv.serve(ready))
    except KeyboardInterrupt: pass


if __name__ == '__main__': main()
