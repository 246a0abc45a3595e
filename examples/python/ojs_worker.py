#!/usr/bin/env python3
"""A stagecoach stage in Python over the OJS HTTP binding, standard library only (docs/http-binding.md).

It fetches jobs from a queue of `stagecoach admin`, runs a handler on each and settles it:
an ack carries the handler's result and the jobs it emits downstream (settled as ctx.emit is:
confirmed before the input is acknowledged); an exception is a nack, retried on the queue's
ladder. A heartbeat keeps long jobs claimed.

    python3 ojs_worker.py --url http://127.0.0.1:9500 --queue conversions --tenant acme --emit-to representations

With no handler module it runs `convert`, the example pipeline's converter step: a document's
text out of the file the job names, emitted as a `doc.text` representation.
"""
import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

MEDIA = "application/openjobspec+json"


class Binding:
    def __init__(self, url, token=None, tenant=None):
        self.url = url.rstrip("/")
        self.headers = {"Content-Type": MEDIA, "Accept": MEDIA}
        if token:
            self.headers["Authorization"] = "Bearer " + token
        if tenant:
            self.headers["X-OJS-Tenant"] = tenant

    def post(self, path, body):
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            raise RuntimeError("%s %s: %s %s" % ("POST", path, err.code, err.read().decode(errors="replace"))) from None

    def fetch(self, queue, worker, count=1, wait_ms=2000, visibility_ms=None):
        body = {"queues": [queue], "worker_id": worker, "count": count, "wait_ms": wait_ms}
        if visibility_ms:
            body["visibility_timeout_ms"] = visibility_ms
        return self.post("/ojs/v1/workers/fetch", body)["jobs"]

    def ack(self, job_id, result=None, emit=()):
        return self.post("/ojs/v1/workers/ack", {"job_id": job_id, "result": result, "emit": list(emit)})

    def nack(self, job_id, error, retryable=True):
        body = {"job_id": job_id, "error": {"type": type(error).__name__, "message": str(error), "retryable": retryable}}
        return self.post("/ojs/v1/workers/nack", body)


def convert(job, emit_to):
    """The converter step: the text of the document a conversion names (args: [path])."""
    path = job["args"][0]
    with open(path, encoding="utf-8", errors="replace") as source:
        text = source.read()
    return {"chars": len(text)}, [{"queue": emit_to, "type": "doc.text", "args": [path, text]}]


def echo(job, emit_to):
    """For tests: `fail-once` fails its first attempt; anything else is emitted as `<type>.done`."""
    if job["args"] and job["args"][0] == "fail-once" and job["attempt"] == 1:
        raise ValueError("failing the first attempt on purpose")
    emits = [{"queue": emit_to, "type": job["type"] + ".done", "args": job["args"]}] if emit_to else []
    return {"echoed": job["args"]}, emits


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("STAGECOACH_URL", "http://127.0.0.1:9500"))
    parser.add_argument("--token", default=os.environ.get("STAGECOACH_TOKEN"))
    parser.add_argument("--tenant")
    parser.add_argument("--queue", required=True)
    parser.add_argument("--emit-to")
    parser.add_argument("--handler", choices=["convert", "echo"], default="convert")
    parser.add_argument("--worker-id", default="python-%d" % os.getpid())
    parser.add_argument("--batch", type=int, default=16, help="jobs per fetch")
    parser.add_argument("--max-jobs", type=int, default=0, help="stop after settling this many (0: run until interrupted)")
    parser.add_argument("--idle-exit", type=float, default=0, help="stop after this many seconds without a job (0: never)")
    args = parser.parse_args()
    binding = Binding(args.url, args.token, args.tenant)
    handler = convert if args.handler == "convert" else echo
    settled, idle_since = 0, time.monotonic()
    while args.max_jobs == 0 or settled < args.max_jobs:
        jobs = binding.fetch(args.queue, args.worker_id, count=args.batch)
        if not jobs:
            if args.idle_exit and time.monotonic() - idle_since > args.idle_exit:
                break
            continue
        idle_since = time.monotonic()
        for job in jobs:
            try:
                result, emits = handler(job, args.emit_to)
            except Exception as error:  # a failure of the handler is the job's: retried by its policy
                answer = binding.nack(job["id"], error)
            else:
                answer = binding.ack(job["id"], result, emits)
            settled += 1
            print(json.dumps({"id": job["id"], "attempt": job["attempt"], "state": answer.get("state")}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
