import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test, vi } from "vitest";
import type { AnyModel } from "@anywidget/types";
import { HOST_PROPERTY } from "../src/host";
import widget, { NO_ANSWER, modelHost, type WidgetModel } from "../src/widget";
import { fixture } from "./helpers";

const here = dirname(fileURLToPath(import.meta.url));
const packed = JSON.parse(readFileSync(join(here, "fixtures", "real-mlp.packed.json"), "utf8"));

/** The part of anywidget's model the host uses, with events fired by hand. */
function fakeModel(status = "ready", doc: unknown = { title: "f" }, explorerId = "") {
  const traits: Record<string, unknown> = { doc, status, explorer_id: explorerId };
  const handlers = new Map<string, Set<() => void>>();
  const sent: unknown[] = [];
  const model = {
    get: (k: string) => traits[k],
    on: (e: string, cb: () => void) => {
      if (!handlers.has(e)) handlers.set(e, new Set());
      handlers.get(e)!.add(cb);
    },
    off: (e: string, cb: () => void) => handlers.get(e)?.delete(cb),
    send: (m: unknown) => sent.push(m),
  };
  const fire = (e: string) => handlers.get(e)?.forEach((cb) => cb());
  const set = (k: string, v: unknown) => {
    traits[k] = v;
    fire(`change:${k}`);
  };
  return { model: model as unknown as AnyModel<WidgetModel>, sent, fire, set, handlers };
}

describe("the live widget's host", () => {
  test("says so when a rerun gets no answer from the kernel", () => {
    vi.useFakeTimers();
    const { model, sent } = fakeModel();
    const host = modelHost(model, 1000);
    const seen: string[] = [];
    host.subscribe(() => seen.push(host.getStatus!()));
    host.requestRerun!(["torch"]);
    expect(sent).toEqual([{ type: "rerun", executors: ["torch"] }]);
    vi.advanceTimersByTime(999);
    expect(host.getStatus!()).toBe("ready");
    vi.advanceTimersByTime(1);
    expect(host.getStatus!()).toBe(NO_ANSWER);
    expect(seen).toEqual([NO_ANSWER]);
    vi.useRealTimers();
  });

  test("waits as long as the kernel is running the rerun", () => {
    vi.useFakeTimers();
    const { model, set } = fakeModel();
    const host = modelHost(model, 1000);
    host.subscribe(() => {});
    host.requestRerun!(["torch"]);
    set("status", "running…");
    vi.advanceTimersByTime(60_000);
    expect(host.getStatus!()).toBe("running…");
    set("status", "ready");
    expect(host.getStatus!()).toBe("ready");
    vi.useRealTimers();
  });

  test("says so at once when the connection drops during a rerun, and not otherwise", () => {
    const { model, set, fire } = fakeModel();
    const host = modelHost(model, 60_000);
    const unsubscribe = host.subscribe(() => {});
    fire("comm_live_update");
    expect(host.getStatus!()).toBe("ready");
    host.requestRerun!(["torch"]);
    set("status", "running…");
    fire("comm_live_update");
    expect(host.getStatus!()).toBe(NO_ANSWER);
    // a late answer (the kernel was only busy) replaces the message
    set("status", "ready");
    expect(host.getStatus!()).toBe("ready");
    unsubscribe();
  });

  test("drops its model listeners with the last subscriber", () => {
    const { model, handlers } = fakeModel();
    const host = modelHost(model);
    const a = host.subscribe(() => {});
    const b = host.subscribe(() => {});
    a();
    expect(handlers.get("change:doc")?.size).toBe(1);
    b();
    expect([...handlers.values()].every((s) => s.size === 0)).toBe(true);
  });
});

describe("the live widget's document", () => {
  test("a packed document (what Python sends) is shown unpacked, and a newer one replaces it", async () => {
    const { model, set } = fakeModel("ready", packed);
    const host = modelHost(model);
    let seen = 0;
    host.subscribe(() => seen++);
    await vi.waitFor(() => expect(host.getDocument()).toEqual(fixture("real-mlp")));
    expect(seen).toBeGreaterThan(0);
    set("doc", { ...packed }); // a rerun's document: a new object, unpacked again
    const before = host.getDocument();
    await vi.waitFor(() => expect(host.getDocument()).not.toBe(before));
    expect(host.getDocument()).toEqual(fixture("real-mlp"));
  });
});

describe("the views of one widget", () => {
  const render = (model: AnyModel<WidgetModel>, el: HTMLElement) =>
    (widget.render as unknown as (p: { model: unknown; el: HTMLElement }) => () => void)({
      model,
      el,
    });

  test("a view that replaces one taken off the page adopts its explorer, with the user's step", async () => {
    const { model } = fakeModel("ready", fixture("real-mlp"), "w1");
    const first = document.createElement("div");
    document.body.append(first);
    const cleanupFirst = render(model, first);
    const explorer = first.querySelector(".thunder-explorer")!;
    expect(explorer).not.toBeNull();
    const step = first.querySelectorAll<HTMLElement>('[data-testid="step"]')[1]!;
    step.click();
    expect(step.getAttribute("aria-selected")).toBe("true");
    // JupyterLab's update of the display: the old view's node is emptied, a new view renders
    first.textContent = "";
    const second = document.createElement("div");
    document.body.append(second);
    const cleanupSecond = render(model, second);
    expect(second.querySelector(".thunder-explorer")).toBe(explorer);
    expect(second.querySelectorAll('[data-testid="step"]')[1]!.getAttribute("aria-selected")).toBe(
      "true",
    );
    expect(HOST_PROPERTY in second).toBe(true);
    cleanupFirst(); // the old view goes: the adopted explorer stays
    expect(second.querySelector(".thunder-explorer")).toBe(explorer);
    cleanupSecond();
    expect(second.querySelector(".thunder-explorer")).toBeNull();
    first.remove();
    second.remove();
  });

  test("two views on the page at once get an explorer each", () => {
    const { model } = fakeModel("ready", fixture("real-mlp"), "w2");
    const a = document.createElement("div");
    const b = document.createElement("div");
    document.body.append(a, b);
    const cleanups = [render(model, a), render(model, b)];
    expect(a.querySelector(".thunder-explorer")).not.toBeNull();
    expect(b.querySelector(".thunder-explorer")).not.toBeNull();
    expect(a.querySelector(".thunder-explorer")).not.toBe(b.querySelector(".thunder-explorer"));
    cleanups.forEach((c) => c());
    a.remove();
    b.remove();
  });
});
