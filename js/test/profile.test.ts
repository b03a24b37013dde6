import { afterEach, describe, expect, test } from "vitest";
import type { ExplorerHost } from "../src/host";
import { heatClass } from "../src/profile-view";
import { validateDocument, type Profile, type Step, type TraceDocument } from "../src/schema";
import { click, fixture, mountDoc, type Mounted } from "./helpers";

// backward-gelu.json (see backward.test.ts) with a profile as thunder_viz.profile makes one: costs
// of the top-level nodes of the last computation and backward steps, modules, the saved timeline.

let m: Mounted | null = null;
afterEach(() => {
  m?.cleanup();
  m = null;
});

function lastOf(doc: TraceDocument, kind: string): Step {
  return doc.steps.filter((s) => s.kind === kind).pop()!;
}

function profiled(): { doc: TraceDocument; hot: string; cold: string[] } {
  const doc = fixture("backward-gelu");
  const fw = lastOf(doc, "computation");
  const bw = lastOf(doc, "backward");
  const top = (s: Step): string[] =>
    s.nodes.filter((n) => n.fused_into === null && n.op !== "del").map((n) => n.id);
  const [hot, ...cold] = top(fw);
  const nodes: Profile["steps"][string]["nodes"] = { [hot!]: { ms: 9, bytes: 4096 } };
  for (const id of cold) nodes[id] = { ms: 0.01, bytes: 0 };
  const bwNodes: Profile["steps"][string]["nodes"] = {};
  for (const id of top(bw)) bwNodes[id] = { ms: 1, bytes: -16 };
  const profile: Profile = {
    calls: 3,
    device: "cpu",
    call_ms: 12,
    eager_call_ms: 15,
    backward: true,
    attributed_ms: 9 + 0.01 * cold.length + top(bw).length,
    measured:
      "3 rounds, each one call of thunder and one of eager PyTorch in turn, under one profiler.",
    unsteady: false,
    uncompiled: {},
    steps: {
      [fw.id]: { total_ms: 9 + 0.01 * cold.length, nodes },
      [bw.id]: { total_ms: top(bw).length, nodes: bwNodes },
    },
    modules: [],
    saved: {
      step: bw.id,
      bytes: 64,
      bytes_before_remat: 128,
      timeline: top(bw).map((id, i) => [id, Math.max(0, 64 - 16 * i)] as [string, number]),
    },
  };
  (doc as unknown as Record<string, unknown>).profile = profile;
  return { doc, hot: hot!, cold };
}

describe("profile", () => {
  test("heat grows with the share of the step's time", () => {
    expect(heatClass(0, 100)).toBe("heat-0");
    expect(heatClass(1, 100)).toBe("heat-1");
    expect(heatClass(6, 100)).toBe("heat-3");
    expect(heatClass(50, 100)).toBe("heat-5");
    expect(heatClass(1, 0)).toBe("heat-0");
  });

  test("a profiled document opens on the measured forward step, coloured by time share", () => {
    const { doc, hot } = profiled();
    m = mountDoc(doc);
    const fw = lastOf(doc, "computation");
    expect(m.root.getAttribute("data-step-index")).toBe(String(fw.index));
    const hotNode = m.q(`[data-testid='node'][data-node-id='${hot}']`);
    expect(hotNode.classList.contains("heat-5")).toBe(true);
    expect(hotNode.textContent).toContain("9.00 ms");
    const rows = m.all("[data-testid='profile-row']");
    expect(rows[0]?.getAttribute("data-node-id")).toBe(hot);
    expect(m.q("[data-testid='profile-summary']").textContent).toContain("eager 15.00 ms");
    // a row of the table selects its node
    click(m.q(`[data-testid='profile-node'][data-node-id='${hot}']`));
    expect(m.q("[data-testid='node'][aria-selected='true']").getAttribute("data-node-id")).toBe(
      hot,
    );
    expect(m.q("[data-testid='node-cost']").textContent).toContain("9.00 ms per call");
  });

  test("the backward step has the saved-for-backward timeline; other steps have neither", () => {
    const { doc } = profiled();
    m = mountDoc(doc);
    const bw = lastOf(doc, "backward");
    click(m.q(`[data-testid='step'][data-step-index='${bw.index}']`));
    const chart = m.q("[data-testid='saved-timeline']");
    expect(chart.textContent).toContain("64 B");
    expect(chart.textContent).toContain("128 B before rematerialization");
    click(m.q("[data-testid='step'][data-step-index='2']"));
    expect(m.all("[data-testid='saved-timeline']")).toHaveLength(0);
    expect(m.all("[data-testid='node'][class*='heat-']")).toHaveLength(0);
    expect(m.q("[data-testid='profile']").textContent).toContain("open one of them");
  });

  test("the panel says how the calls were measured, and warns when the load changed", () => {
    const { doc } = profiled();
    const p = (doc as unknown as { profile: Profile }).profile;
    m = mountDoc(doc);
    const measured = m.q("[data-testid='profile-measured']");
    expect(measured.textContent).toContain("3 rounds");
    expect(measured.classList.contains("tx-warn")).toBe(false);
    m.cleanup();
    p.unsteady = true;
    m = mountDoc(doc);
    expect(m.q("[data-testid='profile-measured']").classList.contains("tx-warn")).toBe(true);
    m.cleanup();
    // a document saved before the calls alternated says nothing of it
    const old = p as Partial<Profile>;
    delete old.measured;
    delete old.unsteady;
    m = mountDoc(doc);
    expect(m.all("[data-testid='profile-measured']")).toEqual([]);
    expect(m.q("[data-testid='profile-summary']").textContent).toContain("3 calls");
    // statements measured at more than the median call: no "rest" is claimed
    m.cleanup();
    p.attributed_ms = p.call_ms + 1;
    m = mountDoc(doc);
    expect(m.q("[data-testid='profile-summary']").textContent).not.toContain("the rest");
  });

  test("modules are shown beside eager's, forward on the forward step and backward on the backward", () => {
    const { doc } = profiled();
    const p = (doc as unknown as { profile: Profile }).profile;
    p.modules = [
      {
        path: "fc1",
        ms: 2,
        backward_ms: 3,
        eager_ms: 2.5,
        eager_backward_ms: 4,
        shared: [],
        backward_shared: [],
      },
      {
        path: "act",
        ms: 1,
        backward_ms: 1,
        eager_ms: 0.5,
        eager_backward_ms: null,
        shared: [],
        backward_shared: [],
      },
    ];
    // a document saved before eager's backward, or the shared fusions, were measured has no such fields
    delete (p.modules[1] as Partial<(typeof p.modules)[number]>).eager_backward_ms;
    delete (p.modules[1] as Partial<(typeof p.modules)[number]>).shared;
    delete (p.modules[1] as Partial<(typeof p.modules)[number]>).backward_shared;
    m = mountDoc(doc);
    const cells = (): string[][] =>
      m!
        .all("[data-testid='profile-module']")
        .map((r) => Array.from(r.querySelectorAll("td")).map((td) => td.textContent ?? ""));
    expect(m.q("[data-testid='profile-modules'] caption").textContent).toContain("(forward)");
    expect(cells()).toEqual([
      ["fc1", "2.00 ms", "2.50 ms"],
      ["act", "1.00 ms", "500.0 µs"],
    ]);
    click(m.q(`[data-testid='step'][data-step-index='${lastOf(doc, "backward").index}']`));
    expect(m.q("[data-testid='profile-modules'] caption").textContent).toContain("(backward)");
    expect(cells()).toEqual([
      ["fc1", "3.00 ms", "4.00 ms"],
      ["act", "1.00 ms", "–"],
    ]);
  });

  test("a module whose ops run in a fusion with other modules' is not ranked against eager's whole time", () => {
    // A fusion counts in the scope around all its ops (Note [A fusion across modules]): "bn 0.30 ms" in
    // green beside eager's 20 ms, and a backward of 0 ms left out, read as thunder being faster.
    const { doc } = profiled();
    const p = (doc as unknown as { profile: Profile }).profile;
    p.modules = [
      {
        path: "bn",
        ms: 0.3,
        backward_ms: 0,
        eager_ms: 20,
        eager_backward_ms: 5,
        shared: ["TorchCompile0"],
        backward_shared: ["TorchCompile1"],
      },
      {
        path: "fc",
        ms: 2,
        backward_ms: 3,
        eager_ms: 2.5,
        eager_backward_ms: 4,
        shared: [],
        backward_shared: [],
      },
    ];
    m = mountDoc(doc);
    const rows = (): [string, string, string, boolean][] =>
      m!.all("[data-testid='profile-module']").map((r) => {
        const td = Array.from(r.querySelectorAll("td"));
        const [path, ms, eager] = td.map((c) => c.textContent ?? "");
        return [
          path!,
          ms!,
          eager!,
          td[2]!.classList.contains("tx-good") || td[2]!.classList.contains("tx-warn"),
        ];
      });
    expect(rows()).toEqual([
      ["bn", "300.0 µs + part of TorchCompile0", "20.00 ms", false],
      ["fc", "2.00 ms", "2.50 ms", true],
    ]);
    click(m.q(`[data-testid='step'][data-step-index='${lastOf(doc, "backward").index}']`));
    expect(rows()).toEqual([
      ["bn", "in TorchCompile1", "5.00 ms", false],
      ["fc", "3.00 ms", "4.00 ms", true],
    ]);
  });

  test("a fusion still warming up when the calls began says its time is torch's kernels'", () => {
    // profiled right after the first call, a background-compiled region ran torch's kernels under its name
    const { doc } = profiled();
    const p = (doc as unknown as { profile: Profile }).profile;
    const fusion = lastOf(doc, "computation").nodes.find((n) => n.fusion)!;
    p.uncompiled = { [fusion.op]: "warming up" };
    m = mountDoc(doc);
    expect(m.q("[data-testid='profile-measured']").classList.contains("tx-warn")).toBe(true);
    click(m.q(`[data-testid='profile-node'][data-node-id='${fusion.id}']`));
    const cost = m.q("[data-testid='node-cost']");
    expect(cost.textContent).toContain("not compiled when the calls began (warming up)");
    expect(cost.classList.contains("tx-warn")).toBe(true);
    // a node that is not a fusion, and a document without the field, say nothing of it
    const other = Object.keys(p.steps[lastOf(doc, "computation").id]!.nodes).find(
      (id) => id !== fusion.id,
    )!;
    click(m.q(`[data-testid='profile-node'][data-node-id='${other}']`));
    expect(m.q("[data-testid='node-cost']").textContent).not.toContain("not compiled");
    m.cleanup();
    delete (p as Partial<Profile>).uncompiled;
    m = mountDoc(doc);
    expect(m.q("[data-testid='profile-measured']").classList.contains("tx-warn")).toBe(false);
  });

  test("the runs table's Profile action asks the host, and shows it is profiling", () => {
    const doc = fixture("backward-gelu");
    doc.executors = {
      available: ["torch"],
      selected: ["torch"],
      always: ["torch"],
      unavailable: {},
      interactive: true,
      reason: null,
    };
    let asked = 0;
    const host: ExplorerHost = {
      getDocument: () => doc,
      getStatus: () => "ready",
      subscribe: () => () => undefined,
      requestRerun: () => undefined,
      requestProfile: () => {
        asked++;
      },
    };
    m = mountDoc(doc, host);
    const button = m.q<HTMLButtonElement>("[data-testid='profile-run']");
    expect(button.disabled).toBe(false);
    click(button);
    expect(asked).toBe(1);
    expect(m.q<HTMLButtonElement>("[data-testid='profile-run']").disabled).toBe(true);
    expect(m.q("[data-testid='status']").textContent).toBe("profiling…");
  });

  test("a static snapshot has no Profile action", () => {
    m = mountDoc(fixture("backward-gelu"));
    expect(m.all("[data-testid='profile-run']")).toHaveLength(0);
  });

  test("a profile naming a node cost badly is refused with its path", () => {
    const { doc } = profiled();
    const p = (doc as unknown as { profile: Profile }).profile;
    const sid = Object.keys(p.steps)[0]!;
    (p.steps[sid]!.nodes as Record<string, unknown>)["x"] = { ms: "fast", bytes: 0 };
    const result = validateDocument(doc);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors.join(" ")).toContain(`profile.steps["${sid}"]`);
  });
});
