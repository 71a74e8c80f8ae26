#!/usr/bin/python3
"""The console's details of issue 30 (point 5) in headless Chromium, against `dlqctl serve`
over the test Redis (database 4, its own):

  - the JSON payload view keeps the stored key order and each token's bytes;

    test_console_details.py --dlqctl PATH     (ctest: fixture `redis`, DLQ_BROWSER_TESTS)
"""
import argparse

from selenium.webdriver.common.by import By

from console_support import Serve, check, dead_key, finish, redis_client, redis_url
from test_console_browser import browser, click_queue, leave, raw_envelope, wait

DB = 4
ORDER = "console-order"
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlqctl", required=True)
    args = ap.parse_args()
    url = redis_url(DB)
    r = redis_client(url)
    for k in r.scan_iter("*console-*"):
        r.delete(k)
    r.rpush(dead_key(ORDER), raw_envelope(ORDER, ORDER_PAYLOAD, "bad order", error_type="OrderError"))

    d = browser()
    srv = Serve(args.dlqctl, url)
    try:
        d.get(srv.url)
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, f'.queue-item[data-queue="{ORDER}"]'), "queue list shows the queues")
        payload_order(d)
    finally:
        leave(d)
        srv.stop()
    d.quit()
    for k in r.scan_iter("*console-*"):
        r.delete(k)
    finish("console details")


if __name__ == "__main__":
    main()
