"""A loopback fake of two providers' batch APIs, for the tests, the batch notebook and `bench.py batch`:

- OpenAI (and any OpenAI-compatible server with `/v1/batches`, as vLLM has): `POST /v1/files` (a multipart
  JSONL upload, purpose `batch`), `GET /v1/files/<id>/content`, `POST /v1/batches`, `GET /v1/batches/<id>`,
  `GET /v1/batches` (newest first, `after`/`limit` paging), `POST /v1/batches/<id>/cancel`;
- Gemini Batch Mode as google-genai calls it: `POST /v1beta/models/<m>:batchGenerateContent` with inlined
  requests, `GET /v1beta/batches/<id>` (the results come inline once it succeeded), `GET /v1beta/batches`.

It answers on 127.0.0.1 only. A batch runs for `duration` seconds after it is created, then every request
in it is answered at once ("Batch reply to: <the prompt>"). Faults, each counted down over the batches
or calls of both providers: the first `fail` batches fail, the next `expire` batches expire with half of
their requests answered, the first `missing` batches that complete leave their last request out of both
output files, and the first `download_500` downloads of a result (an OpenAI file, a finished Gemini batch)
answer 500. A prompt holding `[[batch:500]]` gets an item error 500 the first time it is answered,
`[[batch:400]]` a 400 every time.

`GET /stats` counts what a client cost: `submitted` (requests in created batches), `billed` (requests
answered), `duplicated` (requests answered more than once), `batches`, and the calls by route.

    python tests/batch_server.py --duration 2     # prints one JSON line {"url": ...} and serves
"""
from __future__ import annotations
import argparse, asyncio, json, os, re, threading, time, uuid
from collections import Counter
from contextlib import contextmanager

from aiohttp import web

_ITEM_FAULT = re.compile(r'\[\[batch:(500|400)\]\]')
_GEMINI_STATES = {'completed': 'BATCH_STATE_SUCCEEDED', 'failed': 'BATCH_STATE_FAILED', 'expired': 'BATCH_STATE_EXPIRED',
                  'in_progress': 'BATCH_STATE_RUNNING', 'cancelled': 'BATCH_STATE_CANCELLED'}


def _reply_text(prompt:str)->str: return f'Batch reply to: {prompt[:60]}'


class BatchServer:
    "The fake's state: files, batches, fault counters and what each request cost"
    def __init__(self,
                 duration:float=0.2,   # seconds from a batch's creation to its end
                 fail:int=0,           # the first `fail` batches to end fail
                 expire:int=0,         # the next `expire` batches expire (OpenAI: half answered; Gemini: none)
                 missing:int=0,        # the first `missing` batches to complete leave their last request out
                 download_500:int=0):  # the first `download_500` downloads of results answer 500
        self.duration = duration
        self.faults = dict(fail=fail, expire=expire, missing=missing, download_500=download_500)
        self.files, self.batches = {}, {}            # id -> bytes; id -> dict
        self.submitted, self.billed, self.item_faults = Counter(), Counter(), Counter()
        self.calls = Counter()

    def inject(self, **faults):
        "Set fault counters (`fail`, `expire`, `missing`, `download_500`)"
        for k, v in faults.items():
            if k not in self.faults: raise ValueError(f'unknown fault {k!r}; expected {", ".join(self.faults)}')
            self.faults[k] = v

    def take(self, fault:str)->bool:
        "Whether this batch or call gets `fault` (its counter goes down)"
        if self.faults[fault] <= 0: return False
        self.faults[fault] -= 1
        return True

    # -- answering requests ----------------------------------------------------------------------------
    def answer(self, key:str, prompt:str)->tuple[int, str]:
        "(status, text) of one request; a 200 is billed"
        m = _ITEM_FAULT.search(prompt)
        if m and (m.group(1) == '400' or self.item_faults[key] == 0):
            self.item_faults[key] += 1
            return int(m.group(1)), f'injected item error {m.group(1)}'
        self.billed[key] += 1
        return 200, _reply_text(prompt)

    def run(self, b:dict):
        "Finish batch `b` once its time has come: its fate, then an answer for each request"
        if b['status'] != 'in_progress' or time.time() < b['created_at'] + self.duration: return
        fate = 'failed' if self.take('fail') else 'expired' if self.take('expire') else 'completed'
        items = b['items'] if fate != 'failed' else []
        half = len(items)//2 if b['kind'] == 'openai' else 0     # an expired Gemini batch returns nothing
        done = items[:half] if fate == 'expired' else items[:-1] if items and self.take('missing') else items
        b['results'] = [(key, prompt, *self.answer(key, prompt)) for key, prompt in done]
        b['expired'] = [key for key, _ in items[len(done):]] if fate == 'expired' else []
        b['status'] = fate

    def stats(self)->dict:
        dup = sum(1 for n in self.billed.values() if n > 1)
        return dict(submitted=sum(self.submitted.values()), unique=len(self.submitted), billed=sum(self.billed.values()),
                    duplicated=dup, batches=len(self.batches), calls=dict(self.calls), faults_left={k: v for k, v in self.faults.items() if v})


# -- OpenAI --------------------------------------------------------------------------------------------
def _openai_line(key:str,     # the request's custom_id
                 prompt:str,  # what it asked
                 status:int,  # 200, or the item error
                 text:str     # the reply, or the error message
                )->dict:
    "One line of an output (200) or error file"
    if status != 200:
        return dict(id=f'batch_req_{uuid.uuid4().hex[:12]}', custom_id=key, error=None,
                    response=dict(status_code=status, request_id='r', body={'error': {'message': text, 'type': 'server_error'}}))
    body = dict(id='chatcmpl-x', object='chat.completion', created=int(time.time()), model='fake',
                choices=[dict(index=0, message=dict(role='assistant', content=text), finish_reason='stop')],
                usage=dict(prompt_tokens=len(prompt.split()) + 5, completion_tokens=len(text.split()),
                           total_tokens=len(prompt.split()) + 5 + len(text.split())))
    return dict(id=f'batch_req_{uuid.uuid4().hex[:12]}', custom_id=key, error=None,
                response=dict(status_code=200, request_id='r', body=body))

def _public(b:dict)->dict:
    "The Batch object of the OpenAI API"
    keep = ('id', 'object', 'endpoint', 'input_file_id', 'completion_window', 'status', 'output_file_id', 'error_file_id',
            'created_at', 'metadata', 'errors', 'request_counts')
    return {k: b.get(k) for k in keep}

def _jsonl(rows)->bytes: return b''.join(json.dumps(r).encode() + b'\n' for r in rows)

def _prompt_of(body:dict)->str:
    return next((m['content'] for m in reversed(body.get('messages', [])) if m.get('role') == 'user'), '')

class OpenAIRoutes:
    def __init__(self, s:BatchServer): self.s = s

    async def upload(self, request):
        form = await request.post()
        f = form['file']
        fid = f'file-{uuid.uuid4().hex[:16]}'
        self.s.files[fid] = data = f.file.read()
        return web.json_response(dict(id=fid, object='file', bytes=len(data), created_at=int(time.time()),
                                      filename=f.filename, purpose=form.get('purpose', 'batch'), status='processed'))

    async def content(self, request):
        fid = request.match_info['fid']
        if fid not in self.s.files: return web.json_response({'error': {'message': 'no such file'}}, status=404)
        if self.s.take('download_500'): return web.json_response({'error': {'message': 'injected 500'}}, status=500)
        return web.Response(body=self.s.files[fid], content_type='application/octet-stream')

    async def create(self, request):
        body = await request.json()
        raw = self.s.files.get(body.get('input_file_id'))
        if raw is None: return web.json_response({'error': {'message': 'no such input file'}}, status=400)
        lines = [json.loads(l) for l in raw.splitlines() if l.strip()]
        items = [(l['custom_id'], _prompt_of(l['body'])) for l in lines]
        bid = f'batch_{uuid.uuid4().hex[:16]}'
        self.s.submitted.update(k for k, _ in items)
        self.s.batches[bid] = dict(id=bid, object='batch', endpoint=body['endpoint'], input_file_id=body['input_file_id'],
                                   completion_window=body.get('completion_window', '24h'), status='in_progress',
                                   created_at=time.time(), metadata=body.get('metadata'), items=items, kind='openai',
                                   request_counts=dict(total=len(items), completed=0, failed=0))
        return web.json_response(_public(self.s.batches[bid]) | dict(created_at=int(time.time())))

    def _finish_files(self, b:dict):
        "Write the output and error files of a batch that just ended"
        ok = [_openai_line(*r) for r in b['results'] if r[2] == 200]
        bad = [_openai_line(*r) for r in b['results'] if r[2] != 200]
        bad += [dict(id='batch_req_x', custom_id=k, response=None, error=dict(code='batch_expired',
                     message='This request could not be executed before the completion window expired.'))
                for k in b['expired']]
        for name, rows in (('output_file_id', ok), ('error_file_id', bad)):
            if rows:
                b[name] = fid = f'file-{uuid.uuid4().hex[:16]}'
                self.s.files[fid] = _jsonl(rows)
        b['request_counts'] = dict(total=len(b['items']), completed=len(ok), failed=len(bad))
        if b['status'] == 'failed':
            b['errors'] = dict(object='list', data=[dict(code='injected_failure', message='batch failed (injected)', line=None)])

    async def retrieve(self, request):
        b = self.s.batches.get(request.match_info['bid'])
        if b is None or b['kind'] != 'openai': return web.json_response({'error': {'message': 'no such batch'}}, status=404)
        if b['status'] == 'in_progress':
            self.s.run(b)
            if b['status'] != 'in_progress': self._finish_files(b)
        return web.json_response(_public(b) | dict(created_at=int(b['created_at'])))

    async def listing(self, request):
        bs = sorted((b for b in self.s.batches.values() if b['kind'] == 'openai'), key=lambda b: b['created_at'], reverse=True)
        after, limit = request.query.get('after'), int(request.query.get('limit', 20))
        if after: bs = bs[next((i + 1 for i, b in enumerate(bs) if b['id'] == after), len(bs)):]
        page = [_public(b) | dict(created_at=int(b['created_at'])) for b in bs[:limit]]
        return web.json_response(dict(object='list', data=page, has_more=len(bs) > limit,
                                      first_id=page[0]['id'] if page else None, last_id=page[-1]['id'] if page else None))


# -- Gemini --------------------------------------------------------------------------------------------
def _gemini_response(key:str, prompt:str, status:int, text:str)->dict:   # the arguments of `_openai_line`
    "One inlined response of a finished Gemini batch"
    if status != 200: return dict(error=dict(code=status, message=text), metadata={'key': key})
    return dict(metadata={'key': key}, response=dict(
        candidates=[dict(content=dict(role='model', parts=[dict(text=text)]), finishReason='STOP', index=0)],
        usageMetadata=dict(promptTokenCount=len(prompt.split()) + 5, candidatesTokenCount=len(text.split()))))

def _gemini_prompt(req:dict)->str:
    parts = [p.get('text', '') for c in req.get('contents', []) if c.get('role', 'user') == 'user' for p in c.get('parts', [])]
    return parts[-1] if parts else ''

class GeminiRoutes:
    def __init__(self, s:BatchServer): self.s = s

    def operation(self, b:dict, results:bool=True)->dict:
        meta = {'@type': 'type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch', 'model': b['model'],
                'displayName': b['display_name'], 'state': _GEMINI_STATES[b['status']],
                'createTime': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(b['created_at']))}
        done = b['status'] != 'in_progress'
        if done and results and b['status'] == 'completed':
            meta['output'] = {'inlinedResponses': {'inlinedResponses': [_gemini_response(*r) for r in b['results']]}}
        return dict(name=b['id'], metadata=meta, done=done)

    async def create(self, request):
        body = await request.json()
        batch = body.get('batch', {})
        reqs = batch.get('inputConfig', {}).get('requests', {}).get('requests', [])
        items = [((r.get('metadata') or {}).get('key', str(i)), _gemini_prompt(r.get('request', {}))) for i, r in enumerate(reqs)]
        bid = f'batches/{uuid.uuid4().hex[:16]}'
        self.s.submitted.update(k for k, _ in items)
        self.s.batches[bid] = b = dict(id=bid, kind='gemini', model=request.match_info['model'], status='in_progress',
                                       display_name=batch.get('displayName', ''), created_at=time.time(), items=items)
        return web.json_response(self.operation(b))

    async def get(self, request):
        b = self.s.batches.get('batches/' + request.match_info['bid'])
        if b is None: return web.json_response({'error': {'code': 404, 'message': 'no such batch', 'status': 'NOT_FOUND'}}, status=404)
        self.s.run(b)
        if b['status'] != 'in_progress' and self.s.take('download_500'):
            return web.json_response({'error': {'code': 500, 'message': 'injected 500', 'status': 'INTERNAL'}}, status=500)
        return web.json_response(self.operation(b))

    async def listing(self, request):
        bs = sorted((b for b in self.s.batches.values() if b['kind'] == 'gemini'), key=lambda b: b['created_at'], reverse=True)
        return web.json_response(dict(operations=[self.operation(b, results=False) for b in bs]))


# -- the app -------------------------------------------------------------------------------------------
def app(s:BatchServer)->web.Application:
    o, g = OpenAIRoutes(s), GeminiRoutes(s)
    @web.middleware
    async def count(request, handler):
        route = request.match_info.route.resource.canonical if request.match_info.route.resource else request.path
        s.calls[f'{request.method} {route}'] += 1
        return await handler(request)
    a = web.Application(client_max_size=512 * 2**20, middlewares=[count])
    a.router.add_post('/v1/files', o.upload)
    a.router.add_get('/v1/files/{fid}/content', o.content)
    a.router.add_post('/v1/batches', o.create)
    a.router.add_get('/v1/batches', o.listing)
    a.router.add_get('/v1/batches/{bid}', o.retrieve)
    a.router.add_post('/v1beta/models/{model}:batchGenerateContent', g.create)
    a.router.add_get('/v1beta/batches', g.listing)
    a.router.add_get('/v1beta/batches/{bid}', g.get)
    async def stats(request): return web.json_response(s.stats())
    a.router.add_get('/stats', stats)
    return a

async def _serve(s:BatchServer, port:int, ready):
    runner = web.AppRunner(app(s), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, '127.0.0.1', port)
    await site.start()
    ready(site._server.sockets[0].getsockname()[1])
    return runner

def start_thread(**cfg)->tuple[BatchServer, str, callable]:
    "Serve in a daemon thread of this process; returns (server, base url, stop)"
    s, got, loop = BatchServer(**cfg), threading.Event(), asyncio.new_event_loop()
    port = []
    def main():
        asyncio.set_event_loop(loop)
        runner = loop.run_until_complete(_serve(s, 0, lambda p: (port.append(p), got.set())))
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
    t = threading.Thread(target=main, daemon=True, name='batch-server')
    t.start(); got.wait(10)
    def stop(): loop.call_soon_threadsafe(loop.stop); t.join(10)
    s.url = f'http://127.0.0.1:{port[0]}'
    return s, s.url, stop

@contextmanager
def serving(**cfg):
    "The fake, served in a thread for the length of the block; its `url` attribute is its base URL"
    s, _, stop = start_thread(**cfg)
    try: yield s
    finally: stop()

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--port', type=int, default=0)
    for name in ('fail', 'expire', 'missing', 'download_500'): p.add_argument(f'--{name.replace("_", "-")}', type=int, default=0)
    p.add_argument('--duration', type=float, default=0.2)
    a = vars(p.parse_args(argv))
    port = a.pop('port')
    s = BatchServer(**a)
    async def serve():
        await _serve(s, port, lambda p: print(json.dumps(dict(url=f'http://127.0.0.1:{p}', port=p)), flush=True))
        parent = os.getppid()
        while os.getppid() == parent: await asyncio.sleep(0.5)   # ends with the process that started it
    asyncio.run(serve())

if __name__ == '__main__': main()
