#!/usr/bin/python3
"""The console's details of issue 30 (point 5) in headless Chromium, against `dlqctl serve`
over the test Redis (database 4, its own):

  - the JSON payload view keeps the stored key order and each token's bytes;
  - switching queue resets the filter, and a filtered replay that matches nothing moves
    nothing (it gave "Replay 0 matching entries" and confirming moved the unreadable item);
  - an unreadable entry in the list and the card of the corrupt list say what each counts
    (the row said CORRUPT while the Corrupt card said 0);
  - the rows' ages advance as the sidebar's do, without a reload;
  - each filter field's placeholder fits in the field (it read "Min age (15");
  - a long error is collapsed in the drawer with a control to show it all, and the payload
    stays in view (it was pushed off the drawer);
  - --read-only: no mutating control shows (row checkboxes, select-all, the drawer's
    buttons, the corrupt list's purge);

    test_console_details.py --dlqctl PATH     (ctest: fixture `redis`, DLQ_BROWSER_TESTS)
"""
import argparse

from selenium.webdriver.common.by import By

from console_support import Serve, check, dead_key, finish, redis_client, redis_url
from test_console_browser import browser, click_queue, leave, raw_envelope, wait

DB = 4
ORDER = "console-order"
HOOKS = "console-hooks"
FRESH = "console-fresh"
LONG = "console-long"
LONG_ERROR = "Traceback (most recent call last):\n" + "".join(
    f'  File "/srv/app/handlers/step_{i}.py", line {i + 10}, in handle\n    result = next_step(payload, attempt={i})\n'
    for i in range(120)) + "RuntimeError: the end of a long error"
ORDER_PAYLOAD = '{"zeta":1,"alpha":2.50,"mid":"caf\\u00e9","list":[3e2,{"b":1,"a":[]}],"empty":{}}'


def rows(d):
    return d.find_elements(By.CSS_SELECTOR, "#entries tbody tr")


def payload_order(d):
    """Item 1: the drawer shows the payload's keys in their stored order, tokens byte-exact."""
    click_queue(d, ORDER)
    wait(d, lambda: len(rows(d)) == 1, "order: the row shown")
    rows(d)[0].click()
    wait(d, lambda: d.find_element(By.ID, "drawer").is_displayed()
         and d.find_element(By.ID, "drawer-payload").text, "order: drawer opens")
    text = d.find_element(By.ID, "drawer-payload").text
    check("".join(text.split()) == ORDER_PAYLOAD, "order: the payload's bytes in their order", repr(text))
    check("\n" in text, "order: the JSON payload is still laid out on lines", repr(text))
    d.find_element(By.ID, "drawer-close").click()


def corrupt_key(queue):
    return dead_key(queue) + ":corrupt"


def toast_text(d):
    t = d.find_element(By.ID, "toast")
    return t.text if t.is_displayed() else ""


def filters_per_queue(d, r):
    """Item 2: a filter set on one queue is not carried to the next; a replay of what a
    filter matches, when nothing matches, moves nothing."""
    click_queue(d, ORDER)
    wait(d, lambda: len(rows(d)) == 1, "filters: order shown")
    d.find_element(By.ID, "f-error").send_keys("no such error")
    d.find_element(By.ID, "apply-filter").click()
    wait(d, lambda: len(rows(d)) == 0 and "matching" in d.find_element(By.ID, "scan-info").text, "filters: nothing matches")
    click_queue(d, HOOKS)
    wait(d, lambda: d.find_element(By.ID, "queue-title").text == HOOKS, "filters: hooks selected")
    wait(d, lambda: len(rows(d)) == 2, "filters: both hook rows shown, no filter carried over",
         timeout=5)
    check(d.find_element(By.ID, "f-error").get_attribute("value") == "", "filters: the error field is empty",
          d.find_element(By.ID, "f-error").get_attribute("value"))
    # a filter of this queue that matches nothing: nothing may move
    d.find_element(By.ID, "f-error").clear()
    d.find_element(By.ID, "f-error").send_keys("no such error")
    d.find_element(By.ID, "apply-filter").click()
    wait(d, lambda: len(rows(d)) == 0 and "matching" in d.find_element(By.ID, "scan-info").text, "filters: no hook matches")
    d.find_element(By.ID, "btn-replay-filter").click()
    wait(d, lambda: d.find_element(By.ID, "modal").is_displayed() or "Nothing matches" in toast_text(d),
         "filters: replay answers (a dialog or a note)")
    if d.find_element(By.ID, "modal").is_displayed():
        text = d.find_element(By.ID, "modal-text").text
        check(False, "filters: no replay offered when nothing matches", text)
        d.find_element(By.ID, "confirm-ok").click()
        wait(d, lambda: d.find_element(By.ID, "op-state").text.lower() in ("done", "failed", "cancelled"), "filters: replay ends")
        d.find_element(By.ID, "op-close").click()
    check(r.llen(dead_key(HOOKS)) == 2 and r.llen(corrupt_key(HOOKS)) == 0, "filters: nothing moved",
          f"(dead {r.llen(dead_key(HOOKS))}, corrupt {r.llen(corrupt_key(HOOKS))})")
    d.find_element(By.ID, "clear-filter").click()
    wait(d, lambda: len(rows(d)) == 2, "filters: cleared")


def unreadable_words(d, r):
    """Item 4: an unreadable row is not called CORRUPT while the corrupt card (the list
    replay sets such items aside to) says 0; each says what it counts."""
    click_queue(d, HOOKS)
    wait(d, lambda: len(rows(d)) == 2, "unreadable: rows shown")
    check(r.llen(corrupt_key(HOOKS)) == 0 and d.find_element(By.ID, "stat-corrupt").text == "0",
          "unreadable: the corrupt list is empty", d.find_element(By.ID, "stat-corrupt").text)
    tags = d.find_elements(By.CSS_SELECTOR, "#entries .corrupt-tag")
    check(len(tags) == 1 and tags[0].text == "UNREADABLE", "unreadable: the row says UNREADABLE",
          [t.text for t in tags])
    check(len(tags) == 1 and "replay" in (tags[0].get_attribute("title") or "").lower(),
          "unreadable: the row's tag says what replay does with it", tags and tags[0].get_attribute("title"))
    card = d.find_element(By.ID, "stat-corrupt").find_element(By.XPATH, "..")
    label = card.find_element(By.CLASS_NAME, "card-label").text.lower()
    check("set aside" in label, "unreadable: the card says it counts the items set aside", label)


def seconds(text):
    """'7s ago' -> 7 (None for any other form)."""
    t = text.split(" ")[0]
    return int(t[:-1]) if t.endswith("s") and t[:-1].isdigit() else None


def ages_advance(d, r):
    """Item 5: a row's age advances while the page stays open (the sidebar's did, the
    rows' stayed as first drawn). The entry is written just before, so its age is seconds."""
    r.rpush(dead_key(FRESH), raw_envelope(FRESH, '{"fresh":1}', "just failed"))
    d.find_element(By.ID, "refresh").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, f'.queue-item[data-queue="{FRESH}"]'), "ages: the fresh queue listed")
    click_queue(d, FRESH)
    wait(d, lambda: len(rows(d)) == 1, "ages: the fresh row shown")
    cell = lambda: d.find_element(By.CSS_SELECTOR, "#entries tbody tr td:nth-child(2)").text
    first = cell()
    check(seconds(first) is not None, "ages: a fresh entry's age is in seconds", first)
    later = wait(d, lambda: cell() if cell() != first else None, "ages: the row's age changes", timeout=15)
    if later is not None and seconds(first) is not None:
        check(seconds(later) is not None and seconds(later) > seconds(first), "ages: the age grows", f"{first} -> {later}")


PLACEHOLDER_ROOM = """
const out = [];
const c = document.createElement('canvas').getContext('2d');
for (const i of document.querySelectorAll('#filters input')) {
  const st = getComputedStyle(i);
  c.font = st.font;
  const room = i.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
  out.push([i.id, i.placeholder, Math.ceil(c.measureText(i.placeholder).width), Math.floor(room)]);
}
return out;
"""


def placeholders_fit(d):
    """Item 6: the filter fields are wide enough for their placeholders, at the test's
    1440-pixel window and at 1024."""
    click_queue(d, HOOKS)
    wait(d, lambda: d.find_element(By.ID, "f-min-age").is_displayed(), "placeholders: filters shown")
    for width in (1440, 1024):
        d.set_window_size(width, 900)
        wait(d, lambda: d.execute_script("return window.innerWidth") <= width, f"placeholders: window {width}")
        for fid, text, need, room in d.execute_script(PLACEHOLDER_ROOM):
            check(need <= room, f"placeholders: '{text}' fits at {width} px", f"(needs {need} px, has {room})")
    d.set_window_size(1440, 900)


def long_error(d):
    """Item 7: a long error does not push the payload off the drawer, and can be read whole."""
    click_queue(d, LONG)
    wait(d, lambda: len(rows(d)) == 1, "long error: the row shown")
    rows(d)[0].click()
    wait(d, lambda: d.find_element(By.ID, "drawer").is_displayed()
         and d.find_element(By.ID, "drawer-payload").text, "long error: drawer opens")
    body = d.find_element(By.CSS_SELECTOR, "#drawer .drawer-body").rect
    payload = d.find_element(By.ID, "drawer-payload").rect
    check(payload["y"] < body["y"] + body["height"], "long error: the payload is in view when the drawer opens",
          f"(payload at {payload['y']:.0f}, drawer body ends at {body['y'] + body['height']:.0f})")
    more = d.find_elements(By.CSS_SELECTOR, "#drawer-fields .expand")
    check(len(more) == 1, "long error: one control to show the whole error", f"({len(more)})")
    if more:
        more[0].click()
        wait(d, lambda: "RuntimeError: the end of a long error" in d.find_element(By.ID, "drawer-fields").text,
             "long error: the whole error shows after expanding")
    d.find_element(By.ID, "drawer-close").click()


def read_only_controls(d):
    """Item 3: in read-only mode no control that would change anything is shown."""
    wait(d, lambda: d.find_element(By.ID, "readonly-badge").is_displayed(), "read-only: badge shown")
    click_queue(d, HOOKS)
    wait(d, lambda: len(rows(d)) == 2, "read-only: rows shown")
    shown = [c for c in d.find_elements(By.CSS_SELECTOR, "#entries input[type=checkbox]") if c.is_displayed()]
    check(not shown, "read-only: no row or select-all checkbox shown", f"({len(shown)} shown)")
    check(not d.find_element(By.ID, "selection-info").is_displayed(), "read-only: no selection count")
    rows(d)[0].click()
    wait(d, lambda: d.find_element(By.ID, "drawer").is_displayed(), "read-only: drawer opens")
    for b in ("drawer-replay", "drawer-delete", "btn-purge-corrupt", "btn-delete-filter", "btn-recover"):
        check(not d.find_element(By.ID, b).is_displayed(), f"read-only: {b} hidden")
    d.find_element(By.ID, "drawer-close").click()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    for k in r.scan_iter("*console-*"):
        r.delete(k)
    r.rpush(dead_key(ORDER), raw_envelope(ORDER, ORDER_PAYLOAD, "bad order", error_type="OrderError"))
    r.rpush(dead_key(HOOKS), raw_envelope(HOOKS, '{"hook":1}', "webhook 502", error_type="HTTPError"),
            b'{"original_payload": not json')
    r.rpush(dead_key(LONG), raw_envelope(LONG, '{"long":1}', LONG_ERROR, error_type="RuntimeError"))

    d = browser()
    srv = Serve(args.dlqctl, url)
    try:
        d.get(srv.url)
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, f'.queue-item[data-queue="{ORDER}"]'), "queue list shows the queues")
        payload_order(d)
        filters_per_queue(d, r)
        unreadable_words(d, r)
        ages_advance(d, r)
        placeholders_fit(d)
        long_error(d)
    finally:
        leave(d)
        srv.stop()
    srv = Serve(args.dlqctl, url, "--read-only")
    try:
        d.get(srv.url)
        read_only_controls(d)
    finally:
        leave(d)
        srv.stop()
    d.quit()
    for k in r.scan_iter("*console-*"):
        r.delete(k)
    finish("console details")


if __name__ == "__main__":
    main()
