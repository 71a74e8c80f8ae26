#!/usr/bin/python3
"""The console's page in headless Chromium (python3-selenium, chromium-driver), against
`dlqctl serve` over the test Redis:

  - filter by error, select the rows, replay them, watch the progress finish; the payloads
    are byte-exact in the source list (read back with redis-cli);
  - a paced replay of everything cancelled from the page: dead + source == total, and the
    source list holds exactly what the report says moved;
  - delete everything matching a filter (the dialog says how many; only those go);
  - an XSS payload (in the payload, the error and the worker) shows as text, and the flag
    its script would set stays unset;
  - --read-only: the badge shows, the buttons are hidden, a forged POST gets 403;
  - --tokens: an operator's page hides purge (admin only), an admin's shows it;
  - --token-file: without the token the API answers 401 and the page asks for it; with it the
    queues load;
  - screenshots of the page are saved (--screenshot PATH, and PATH with -overview and
    -replay before the extension).

    test_console_browser.py --dlqctl PATH --screenshot PATH     (ctest: fixture `redis`)
"""
import argparse
import datetime
import json
import os
import subprocess
import tempfile
import time
import uuid

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from console_support import (Serve, check, dead_key, finish, redis_client, redis_url, source_key)

DB = 13
TOKEN = "browser-token-0123456789abcdef"


def raw_envelope(queue, payload_text, error, worker="w1", error_type="", when=None):
    """An envelope with the payload's JSON text spliced in verbatim (as dlq stores it)."""
    when = (when or datetime.datetime.now(datetime.timezone.utc)).isoformat()
    rest = {"queue": queue, "error": error, "attempt": 3, "worker": worker, "dead_lettered_at": when,
            "id": str(uuid.uuid4())}
    if error_type:
        rest["error_type"] = error_type
    return '{"original_payload":' + payload_text + "," + json.dumps(rest, separators=(",", ":"))[1:]


def browser():
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1440,900", "--disable-extensions", "--no-first-run"):
        o.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


def click_queue(d, name, tries=20):
    """Clicks the queue list's item for `name`. The list is re-rendered by the page's poll
    and by refresh, so an item found a moment ago can be stale by the click: find it again."""
    for i in range(tries):
        try:
            d.find_element(By.CSS_SELECTOR, f'.queue-item[data-queue="{name}"]').click()
            return
        except StaleElementReferenceException:
            if i == tries - 1:
                raise
            time.sleep(0.05)


def wait(d, cond, what, timeout=20):
    try:
        return WebDriverWait(d, timeout, poll_frequency=0.05).until(lambda drv: cond())
    except Exception:
        check(False, what, "(timed out)")
        return None


def redis_cli(url, *args):
    return subprocess.run(["redis-cli", "-u", url, "--no-raw", *args], capture_output=True, timeout=30).stdout


def leave(d):
    """Navigates away before a console server stops: the page polls api/queues on a timer,
    and a poll landing on the stopped server is logged as ERR_CONNECTION_REFUSED, which the
    check for console errors would then report (a race seen once in a clean test run)."""
    try:
        d.get("about:blank")
    except Exception:
        pass


def forged_post(d, path, body):
    return d.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {method: 'POST', headers: {'Content-Type': 'application/json'}, body: arguments[1]})"
        ".then(r => done(r.status)).catch(e => done('error ' + e));", path, json.dumps(body))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    ap.add_argument("--screenshot", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    web, paced = "console-web", "console-paced"
    for k in r.scan_iter("*console-*"):
        r.delete(k)
    older = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=42)
    timeouts = [f'{{"order": {i},  "note": "caf\\u00e9 {i}", "items": [1, 2.50, 3e2]}}' for i in range(30)]
    entries = []
    for i in range(45):  # 30 timeouts and 15 declines, interleaved
        if i % 3 < 2:
            entries.append(raw_envelope(web, timeouts[len(entries) - i // 3], "payment gateway timeout after 30s",
                                        worker=f"billing-{i % 4}", error_type="TimeoutError", when=older))
        else:
            entries.append(raw_envelope(web, f'{{"order":{1000 + i}}}', "card declined by issuer", worker="billing-0",
                                        error_type="CardError", when=older))
    xss = '<img src=x onerror="window.__dlq_xss=1">'
    entries.append(raw_envelope(web, json.dumps(xss), '<script>window.__dlq_xss=2</script><img src=x onerror="window.__dlq_xss=3">',
                                worker='<b onmouseover="window.__dlq_xss=4">evil</b>', error_type="<i>Type</i>"))
    r.rpush(dead_key(web), *entries)
    n_timeouts = sum(1 for e in entries if "gateway timeout" in e)
    check(n_timeouts == 30, "setup: 30 timeouts")
    r.rpush(dead_key(paced), *[raw_envelope(paced, f'{{"n":{i}}}', "downstream 503", worker="mailer") for i in range(2000)])
    r.rpush(dead_key("console-emails"), *[raw_envelope("console-emails", f'{{"mail":{i}}}', "smtp 550 mailbox unavailable", worker="mailer", error_type="SMTPError") for i in range(7)])

    d = browser()
    srv = Serve(args.dlqctl, url)
    try:
        base = srv.url
        d.get(base)
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, f'.queue-item[data-queue="{web}"]'), "queue list shows the queue")
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, f'#overview tr[data-queue="{paced}"]'), "overview lists the queues")
        row = d.find_element(By.CSS_SELECTOR, f'#overview tr[data-queue="{paced}"]').text
        check("2,000" in row and "console-paced" in row, "overview: depth per queue", row)
        d.save_screenshot(os.path.splitext(args.screenshot)[0] + "-overview.png")
        click_queue(d, web)
        wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")) == 46, "46 rows shown")
        check(d.find_element(By.ID, "stat-dead").text == "46", "stat card: depth", d.find_element(By.ID, "stat-dead").text)

        # XSS: shown as text, never run
        body_text = d.find_element(By.ID, "entries").text
        check("<script>window.__dlq_xss=2</script>" in body_text and '<b onmouseover="window.__dlq_xss=4">evil</b>' in body_text,
              "hostile error and worker shown as text", body_text[-300:])
        check(len(d.find_elements(By.CSS_SELECTOR, "#entries img, #entries script, #entries b")) == 0, "no element made from stored text")
        xss_row = d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")[-1]
        xss_row.click()
        wait(d, lambda: d.find_element(By.ID, "drawer").is_displayed(), "drawer opens")
        check(d.find_element(By.ID, "drawer-payload").text == json.dumps(xss),
              "drawer: the payload as text", d.find_element(By.ID, "drawer-payload").text)
        time.sleep(0.3)
        check(d.execute_script("return window.__dlq_xss === undefined;"), "the would-be script never ran")
        d.find_element(By.ID, "drawer-close").click()

        # filter by error, select all shown, replay, progress to done
        d.find_element(By.ID, "f-error").send_keys("gateway TIMEOUT")
        d.find_element(By.ID, "apply-filter").click()
        wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")) == 30
             and "30 matching" in d.find_element(By.ID, "scan-info").text, "filter shows the 30 timeouts")
        d.find_element(By.ID, "select-all").click()
        wait(d, lambda: d.find_element(By.ID, "selection-info").text == "30 selected", "30 selected")
        d.find_element(By.ID, "btn-replay-selected").click()
        wait(d, lambda: d.find_element(By.ID, "modal").is_displayed(), "confirmation shown")
        check("30 selected entries" in d.find_element(By.ID, "modal-text").text, "confirmation says how many",
              d.find_element(By.ID, "modal-text").text)
        d.find_element(By.ID, "confirm-ok").click()
        wait(d, lambda: d.find_element(By.ID, "op-state").text.lower() == "done", "replay finishes in the page")
        check(d.find_element(By.ID, "op-progress").value_of_css_property("width") != "0px", "progress bar filled")
        got = r.lrange(source_key(web), 0, -1)
        check([g.decode() for g in got] == timeouts, "payloads byte-exact in the source list (python3-redis)")
        cli = redis_cli(url, "LRANGE", source_key(web), "0", "-1").decode()
        check(cli.count("\\u00e9") == 30 and '"{\\"order\\": 0,  \\"note\\": ' in cli, "payloads byte-exact (redis-cli)", cli[:200])
        check(r.llen(dead_key(web)) == 16, "the others stay dead")
        d.find_element(By.ID, "op-close").click()
        d.find_element(By.ID, "clear-filter").click()
        wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")) == 16, "16 rows after the replay")
        d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")[2].click()
        wait(d, lambda: d.find_element(By.ID, "drawer").is_displayed(), "drawer for the screenshot")
        d.find_element(By.ID, "drawer-close").click()
        d.find_element(By.ID, "refresh").click()
        time.sleep(0.5)
        d.save_screenshot(args.screenshot)

        # a paced replay cancelled from the page
        click_queue(d, paced)
        wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")) == 50, "paced queue shown")
        d.find_element(By.ID, "btn-replay-filter").click()
        wait(d, lambda: d.find_element(By.ID, "modal").is_displayed(), "replay-all confirmation")
        check("2,000" in d.find_element(By.ID, "modal-text").text, "confirmation says 2,000", d.find_element(By.ID, "modal-text").text)
        rate = d.find_element(By.ID, "confirm-rate")
        rate.clear()
        rate.send_keys("300")
        d.find_element(By.ID, "confirm-ok").click()
        wait(d, lambda: r.llen(source_key(paced)) >= 100, "paced replay moving")
        d.save_screenshot(os.path.splitext(args.screenshot)[0] + "-replay.png")
        d.find_element(By.ID, "op-cancel").click()
        wait(d, lambda: d.find_element(By.ID, "op-state").text.lower() == "cancelled", "cancelled in the page")
        counts = d.find_element(By.ID, "op-counts").text
        moved = int(counts.split("replayed ")[1].split(" ")[0].replace(",", ""))
        dead, src = r.llen(dead_key(paced)), r.llen(source_key(paced))
        check(0 < moved < 2000 and src == moved and dead + src == 2000, "cancel: report == what moved, nothing lost",
              f"(report {moved}, source {src}, dead {dead})")
        check([json.loads(x)["n"] for x in r.lrange(source_key(paced), 0, -1)] == list(range(src)), "cancel: the oldest moved, in order")
        d.find_element(By.ID, "op-close").click()

        # delete everything matching a filter: a dry run counts first, the dialog says how many
        emails = "console-emails"
        r.rpush(dead_key(emails), raw_envelope(emails, '{"mail":"keep"}', "quota exceeded", worker="mailer"))
        click_queue(d, emails)
        wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")) == 8, "emails shown")
        d.find_element(By.ID, "f-error").send_keys("smtp 550")
        d.find_element(By.ID, "apply-filter").click()
        wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")) == 7, "7 smtp errors")
        d.find_element(By.ID, "btn-delete-filter").click()
        wait(d, lambda: d.find_element(By.ID, "modal").is_displayed(), "delete confirmation")
        check("Delete the 7 entries" in d.find_element(By.ID, "modal-text").text, "delete confirmation says 7",
              d.find_element(By.ID, "modal-text").text)
        d.find_element(By.ID, "confirm-ok").click()
        wait(d, lambda: d.find_element(By.ID, "op-state").text.lower() == "done", "delete finishes")
        check([json.loads(x)["original_payload"] for x in r.lrange(dead_key(emails), 0, -1)] == [{"mail": "keep"}],
              "only the matching entries deleted")
        d.find_element(By.ID, "op-close").click()
    finally:
        leave(d)
        srv.stop()

    # read-only
    srv = Serve(args.dlqctl, url, "--read-only")
    try:
        d.get(srv.url)
        wait(d, lambda: d.find_element(By.ID, "readonly-badge").is_displayed(), "read-only badge shown")
        click_queue(d, web)
        wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")) == 16, "read-only: rows shown")
        for b in ("btn-replay-selected", "btn-delete-selected", "btn-replay-filter", "btn-purge", "btn-recover"):
            check(not d.find_element(By.ID, b).is_displayed(), f"read-only: {b} hidden")
        before = r.llen(dead_key(web))
        status = forged_post(d, "api/replay", {"queue": web, "all": True})
        check(status == 403, "read-only: forged POST gets 403", f"{status}")
        status = forged_post(d, "api/purge", {"queue": web, "confirm": web})
        check(status == 403 and r.llen(dead_key(web)) == before, "read-only: forged purge gets 403, nothing moved", f"{status}")
    finally:
        leave(d)
        srv.stop()

    # token
    with tempfile.TemporaryDirectory() as tmp:
        tok = os.path.join(tmp, "token")
        with open(tok, "w") as f:
            f.write(TOKEN + "\n")
        srv = Serve(args.dlqctl, url, "--token-file", tok)
        try:
            d.get(srv.url)
            d.execute_script("sessionStorage.clear();")
            d.get(srv.url)
            wait(d, lambda: d.find_element(By.ID, "modal-token").is_displayed(), "the page asks for the token")
            status = d.execute_async_script("const done = arguments[0]; fetch('api/queues').then(r => done(r.status));")
            check(status == 401, "no token: 401", f"{status}")
            d.find_element(By.ID, "token-input").send_keys(TOKEN)
            d.find_element(By.ID, "confirm-ok").click()
            wait(d, lambda: d.find_elements(By.CSS_SELECTOR, f'.queue-item[data-queue="{web}"]'), "with the token the queues load")
        finally:
            leave(d)
            srv.stop()
    # named tokens: an operator sees replay and delete but not purge (admin only), an admin
    # sees purge
    with tempfile.TemporaryDirectory() as tmp:
        import hashlib
        tokens = os.path.join(tmp, "tokens")
        with open(tokens, "w") as f:
            for name, role in (("bob", "operator"), ("alice", "admin")):
                f.write(f"{name} {role} {hashlib.sha256((name + '-' + TOKEN).encode()).hexdigest()}\n")
        srv = Serve(args.dlqctl, url, "--tokens", tokens)
        try:
            for name, purge_shown in (("bob", False), ("alice", True)):
                d.get(srv.url)
                d.execute_script("sessionStorage.setItem('dlq-token', arguments[0]);", name + "-" + TOKEN)
                d.get(srv.url)
                wait(d, lambda: d.find_elements(By.CSS_SELECTOR, f'.queue-item[data-queue="{web}"]'),
                     f"{name}: the queues load")
                click_queue(d, web)
                wait(d, lambda: d.find_element(By.ID, "btn-replay-filter").is_displayed(), f"{name}: replay shown")
                check(d.find_element(By.ID, "btn-purge").is_displayed() == purge_shown,
                      f"{name}: purge {'shown' if purge_shown else 'hidden'}")
        finally:
            leave(d)
            srv.stop()
    logs = d.get_log("browser")
    check(not [l for l in logs if l.get("level") == "SEVERE" and "favicon" not in l.get("message", "")
               and "401" not in l.get("message", "") and "403" not in l.get("message", "")], "no script errors in the console", f"{logs}")
    d.quit()
    for k in r.scan_iter("*console-*"):
        r.delete(k)
    finish("console browser")


if __name__ == "__main__":
    main()
