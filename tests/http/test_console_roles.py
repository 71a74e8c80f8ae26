#!/usr/bin/python3
"""Console identity and audit records that stand alone (issue 30, item 1), end to end:
`dlqctl serve --tokens FILE` over the test Redis, driven through urllib, the trail read back
with `dlqctl audit`.

    test_console_roles.py --dlqctl PATH      (ctest: fixture `redis`)

- every mutating route answers 403 (forbidden_role) to each role below the one it needs,
  and not 403 to the roles that have it; reads answer every role; no token is 401;
- the acceptance test of the issue: a console replay by filter, read back with
  `dlqctl audit`, shows the actor (the token's name), the exact filter and the counts; its
  dry run wrote nothing;
- the single --token-file token is admin and the audit names --actor;
- SIGHUP re-reads the token file: a new secret gets in, a removed one gets 401, a malformed
  file keeps the tokens in effect;
- no secret appears in the console's log.
"""
import argparse
import hashlib
import json
import os
import signal
import tempfile
import time
import uuid

from console_support import (call, check, dead_key, dlqctl_audit, envelope, finish, redis_client,
                             redis_url, Serve, wait_operation)

DB = 10  # shared with test_console_audit.py: keys of this test's own queues only

SECRETS = {"alice": "alice-secret-" + uuid.uuid4().hex, "bob": "bob-secret-" + uuid.uuid4().hex,
           "vic": "vic-secret-" + uuid.uuid4().hex}
ROLES = {"alice": "admin", "bob": "operator", "vic": "viewer"}
RANK = {"viewer": 0, "operator": 1, "admin": 2}
SINGLE = "single-token-" + uuid.uuid4().hex


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    q = "console-roles-" + uuid.uuid4().hex[:8]
    tmp = tempfile.mkdtemp(prefix="dlq-roles-")
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write("# name role sha256(secret)\n")
        for name, secret in SECRETS.items():
            f.write(f"{name} {ROLES[name]} {hashlib.sha256(secret.encode()).hexdigest()}\n")
    single = os.path.join(tmp, "token")
    with open(single, "w") as f:
        f.write(SINGLE + "\n")
    os.chmod(single, 0o600)

    ids = [str(uuid.uuid4()) for _ in range(8)]
    errors = ["currency GBP unsupported", "Currency gbp", "timeout", "currency GBP unsupported",
              "other", "currency GBP x", "other", "other"]
    types = ["GatewayTimeout", "GatewayTimeout", "GatewayTimeout", "Other", "Other",
             "GatewayTimeout", "Other", "Other"]
    r.rpush(dead_key(q), *[envelope(q, {"n": i}, errors[i], error_type=types[i], entry_id=ids[i])
                           for i in range(8)])

    serve = Serve(args.dlqctl, url, "--tokens", tokens, "--token-file", single, "--actor", "ops-cli")
    err = ""
    try:
        base = serve.url
        # 403 per mutating route and role; bodies that would change nothing when allowed
        mutating = [
            ("api/replay", "operator", {"queue": q, "ids": ["made-up"]}),
            ("api/discard", "operator", {"queue": q, "filter": {"worker": "nobody"}}),
            ("api/cancel", "operator", {"id": "op-none"}),
            ("api/delete", "operator", {"queue": q, "ids": ["made-up"]}),
            ("api/recover", "operator", {"queue": q}),
            ("api/purge", "admin", {"queue": q, "confirm": "not-the-name"}),
        ]
        for path, need, body in mutating:
            for name, secret in SECRETS.items():
                status, answer, _ = call(base, path, body, token=secret)
                allowed = RANK[ROLES[name]] >= RANK[need]
                if allowed:
                    check(status not in (401, 403), f"{path} as {ROLES[name]} is allowed",
                          f"{status} {answer}")
                else:
                    check(status == 403 and answer["error"]["code"] == "forbidden_role",
                          f"{path} as {ROLES[name]}: 403", f"{status} {answer}")
            status, _, _ = call(base, path, body)
            check(status == 401, f"{path} without a token: 401", str(status))
        for name, secret in SECRETS.items():
            status, _, _ = call(base, "api/queues", token=secret)
            check(status == 200, f"GET api/queues as {ROLES[name]}", str(status))
        check(r.llen(dead_key(q)) == 8, "the refused and empty calls changed nothing")

        # The acceptance test: a console replay by filter, read back with `dlqctl audit`.
        flt = {"error": "currency GBP", "error_type": "GatewayTimeout"}
        status, op, _ = call(base, "api/replay", {"queue": q, "filter": flt, "dry_run": True},
                             token=SECRETS["bob"])
        check(status == 202, "dry run starts", f"{status} {op}")
        done = wait_operation(base, op["id"], token=SECRETS["vic"])
        check(done["report"]["replayed"] == 3, "the dry run would replay 3", str(done["report"]))
        status, op, _ = call(base, "api/replay", {"queue": q, "filter": flt, "rate": 1000},
                             token=SECRETS["bob"])
        check(status == 202 and op["actor"] == "bob", "replay by filter starts as bob",
              f"{status} {op}")
        done = wait_operation(base, op["id"], token=SECRETS["bob"])
        check(done["state"] == "done" and done["report"]["replayed"] == 3,
              "replayed the 3 GBP GatewayTimeouts", str(done))

        lines = dlqctl_audit(args.dlqctl, url, q, "--json").splitlines()
        check(len(lines) == 1, "one record: the dry run and the refusals wrote none",
              "\n".join(lines)[:600])
        rec = json.loads(lines[-1])
        check(rec["actor"] == "bob", "the record names the token", rec["actor"])
        check(rec["operation"] == "replay", "a replay", rec["operation"])
        check(rec["filter"] == flt and list(rec["filter"]) == ["error", "error_type"],
              "the exact filter, as given", json.dumps(rec["filter"]))
        check(rec["counts"]["examined"] == 8 and rec["counts"]["replayed"] == 3,
              "the counts", json.dumps(rec["counts"]))
        check(rec["detail"].get("rate") == 1000 and rec["detail"].get("destination") == q,
              "rate and destination", json.dumps(rec["detail"]))
        check(sorted(rec["ids"]) == sorted([ids[0], ids[1], ids[5]]), "the ids replayed",
              str(rec["ids"]))
        table = dlqctl_audit(args.dlqctl, url, q)
        check("bob" in table and '"error":"currency GBP"' in table and "replayed" in table,
              "the table shows actor, filter and counts", table[:800])

        # bob deletes by filter; the single token (admin, named by --actor) purges
        status, op, _ = call(base, "api/discard", {"queue": q, "filter": {"error": "other"}},
                             token=SECRETS["bob"])
        check(status == 202, "delete by filter starts", f"{status} {op}")
        done = wait_operation(base, op["id"], token=SECRETS["bob"])
        check(done["report"]["deleted"] == 3, "deleted the 3 'other'", str(done["report"]))
        status, body, _ = call(base, "api/purge", {"queue": q, "confirm": q}, token=SINGLE)
        check(status == 200 and body["deleted"] == 2, "the single token may purge",
              f"{status} {body}")
        trail = [json.loads(l) for l in dlqctl_audit(args.dlqctl, url, q, "--json").splitlines()]
        check([t["operation"] for t in trail] == ["replay", "discard", "purge"],
              "three records", str([t["operation"] for t in trail]))
        if len(trail) == 3:
            check(trail[1]["actor"] == "bob" and trail[1]["filter"] == {"error": "other"},
                  "the delete: bob, its filter", json.dumps(trail[1])[:400])
            check(trail[2]["actor"] == "ops-cli", "the single token's changes name --actor",
                  trail[2]["actor"])

        # SIGHUP re-reads the token file: a rotated secret works, the removed one gets 401;
        # a malformed file changes nothing (and the log says so)
        carol = "carol-secret-" + uuid.uuid4().hex
        with open(tokens, "w") as f:
            f.write(f"carol operator {hashlib.sha256(carol.encode()).hexdigest()}\n")
            f.write(f"alice admin {hashlib.sha256(SECRETS['alice'].encode()).hexdigest()}\n")
        serve.proc.send_signal(signal.SIGHUP)
        status = None
        for _ in range(200):
            status, _, _ = call(base, "api/queues", token=carol)
            if status == 200:
                break
            time.sleep(0.05)
        check(status == 200, "after SIGHUP the new token is let in", str(status))
        status, _, _ = call(base, "api/queues", token=SECRETS["bob"])
        check(status == 401, "after SIGHUP the removed token gets 401", str(status))
        with open(tokens, "w") as f:
            f.write("carol operator not-a-hash\n")
        serve.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        status, _, _ = call(base, "api/queues", token=carol)
        check(status == 200, "a malformed file on SIGHUP keeps the tokens in effect", str(status))
    finally:
        serve.stop()
        err = serve.stderr()
        for k in r.scan_iter(f"*{q}*"):
            r.delete(k)
    check("reloaded: 2 tokens" in err and "not reloaded" in err,
          "the log says which reload took and which did not", err[-800:])
    check("delete by filter from '" + q + "' by bob" in err,
          "the log names the token of a change", err[-800:])
    for name, secret in list(SECRETS.items()) + [("single", SINGLE)]:
        check(secret not in err, f"{name}'s secret is not logged")
    finish("test_console_roles")


if __name__ == "__main__":
    main()
