#!/usr/bin/env python3
"""The retry storm, measured: N agents (processes) share one fake API on loopback whose
token-bucket rate limit answers 429 with Retry-After above it. Each agent makes a fixed
number of calls, each one `triage run` around curl with a retry schedule (the seed's
schedule, scaled down to fractions of a second). Run twice: without admission control, and
with it (`run --permit api --budget api`: at most `--permits` calls in flight across the
fleet, retries stopped while the shared budget is spent). Prints one table (or --json).

    bench/storm/storm.py [--agents 64] [--calls 5] [--rate 40] [--burst 10]
                         [--latency 0.05] [--permits 2] [--triage PATH] [--json]
"""
import argparse, json, os, subprocess, sys, tempfile, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Bucket:
    def __init__(self, rate, burst):
        self.rate, self.burst, self.tokens = rate, burst, float(burst)
        self.at, self.lock = time.monotonic(), threading.Lock()
        self.requests = self.limited = 0

    def take(self):
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            self.requests += 1
            if self.tokens >= 1:
                self.tokens -= 1
                return True
            self.limited += 1
            return False


def serve(bucket, latency):
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            ok = bucket.take()
            if ok:
                time.sleep(latency)
                body = b"ok\n"
                self.send_response(200)
            else:
                body = b"rate limited\n"
                self.send_response(429)
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 1024
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


POLICY = """
[retry]
schedule = ["200ms", "400ms", "800ms", "1600ms"]
max_attempts = 5
[retry.kinds.rate_limited]
delay = "1s"
max_attempts = 5
[permits.api]
max = {permits}
lease = "30s"
[budget.api]
max_tokens = 10
token_ratio = 0.1
"""


def one_mode(args, admission):
    bucket = Bucket(args.rate, args.burst)
    srv = serve(bucket, args.latency)
    url = "http://127.0.0.1:%d/" % srv.server_address[1]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, ".triage.toml"), "w") as f:
            f.write(POLICY.format(permits=args.permits))
        extra = ["--permit", "api", "--permit-wait", "120s", "--budget", "api"] if admission else []
        # One agent: its calls one after another, each a `triage run` around curl.
        agent = (
            'ok=0; for i in $(seq %d); do "$T" run --quiet --no-retry-placeholder %s -- '
            'curl -fsS -o /dev/null "$U" 2>/dev/null && ok=$((ok+1)); done; echo $ok'
        )
        env = dict(os.environ, T=args.triage, U=url, CLAUDE_PROJECT_DIR=d, TRIAGE_DIR=os.path.join(d, ".triage"))
        env.pop("TRIAGE_STORE", None)
        script = agent % (args.calls, " ".join(extra))
        script = script.replace("--no-retry-placeholder ", "")
        start = time.monotonic()
        procs = [
            subprocess.Popen(["sh", "-c", script], cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for _ in range(args.agents)
        ]
        done = sum(int((p.communicate()[0].strip() or "0")) for p in procs)
        wall = time.monotonic() - start
    srv.shutdown()
    return {
        "mode": "admission control" if admission else "none",
        "requests": bucket.requests,
        "429s": bucket.limited,
        "share_429": bucket.limited / bucket.requests if bucket.requests else 0.0,
        "completed": done,
        "calls": args.agents * args.calls,
        "wall_s": round(wall, 2),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--agents", type=int, default=64)
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--rate", type=float, default=40.0)
    p.add_argument("--burst", type=int, default=10)
    p.add_argument("--latency", type=float, default=0.05)
    p.add_argument("--permits", type=int, default=2)
    p.add_argument("--triage", default="triage")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    rows = [one_mode(a, False), one_mode(a, True)]
    if a.json:
        print(json.dumps(rows))
        return
    print("| admission | requests | 429s | 429 share | completed | wall time |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s | %d | %d | %.1f %% | %d of %d | %.1f s |" % (
            r["mode"], r["requests"], r["429s"], 100 * r["share_429"], r["completed"], r["calls"], r["wall_s"]))


if __name__ == "__main__":
    sys.exit(main())
