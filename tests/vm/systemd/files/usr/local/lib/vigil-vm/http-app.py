# The app of tests/vm/systemd section 6: an HTTP server that prints one line per request
# ("request PATH") on stdout before it answers 200 "ok". Python ignores SIGPIPE, so a print to
# a pipe whose read end is gone raises BrokenPipeError: the request then fails, and the error
# is appended to the file named by the second argument.
#
#   python3 http-app.py PORT MARK-FILE
import http.server
import sys

PORT = int(sys.argv[1])
MARK = sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        try:
            print("request " + self.path, flush=True)
        except OSError as e:
            with open(MARK, "a") as f:
                f.write("%s: %r\n" % (self.path, e))
            raise
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
