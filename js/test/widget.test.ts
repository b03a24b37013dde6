import { describe, expect, test, vi } from "vitest";
import type { AnyModel } from "@anywidget/types";
import { NO_ANSWER, modelHost, type WidgetModel } from "../src/widget";

/** The part of anywidget's model the host uses, with events fired by hand. */
function fakeModel(status = "ready") {
  const traits: Record<string, unknown> = { doc: { title: "f" }, status };
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
