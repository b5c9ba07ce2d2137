"""Test fixtures, shared by tests/ and by the demos of the notebooks (not part of the package): a web site
served over real HTTP on 127.0.0.1, and small samples of public prompt sets in their real formats.

A notebook uses them through `sys.path.insert(0, str(settings().root/'tests'))` then `from fixtures import ...`."""
import shutil, threading, time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SAMPLES = Path(__file__).parent/'samples'   # written for this project, not copied from the datasets

@dataclass
class Site:
    "A local web site: `pages` maps a path to HTML (or to (content_type, body)); `log` records (path, time, user agent)"
    pages:dict
    host:str='127.0.0.1'
    port:int=0
    log:list=field(default_factory=list)
    @property
    def url(self)->str: return f'http://{self.host}:{self.port}'

def _handler(site:Site)->type:
    "A request handler that serves `site.pages` and logs each GET"
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            site.log.append((self.path, time.monotonic(), self.headers.get('User-Agent', '')))
            page = site.pages.get(self.path)
            if page is None: self.send_error(404); return
            ctype, body = page if isinstance(page, tuple) else ('text/html; charset=utf-8', page)
            body = body.encode('utf-8') if isinstance(body, str) else body
            self.send_response(200); self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    return Handler

@contextmanager
def serve_site(pages:dict, host:str='127.0.0.1'):
    "Serve `pages` on `host` (a free port) in a background thread; yields a `Site`"
    site = Site(dict(pages), host)
    server = ThreadingHTTPServer((host, 0), _handler(site))
    site.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try: yield site
    finally: server.shutdown(); server.server_close()

def write_samples(folder)->dict:
    """Copy the samples into `folder`: an XSTest-format CSV (12 rows, 3 unsafe) and an XSafety-format folder
    (en and zh, one file per risk type, UTF-8 with a BOM, CRLF, one quoted line); return {source: path}"""
    folder = Path(folder)
    shutil.copytree(SAMPLES, folder, dirs_exist_ok=True)
    return {'xstest': str(folder/'xstest_prompts.csv'), 'xsafety': str(folder/'xsafety')}
