import { afterEach, describe, expect, test, vi } from "vitest";
import type { ExplorerHost } from "../src/host";
import { click, fixture, key, mountDoc, type Mounted } from "./helpers";

let m: Mounted | null = null;
afterEach(() => {
  m?.cleanup();
  m = null;
});

function selectedStep(mm: Mounted): string | null {
  return mm.q("[data-testid='step'][aria-selected='true']").getAttribute("data-step-index");
}

describe("explorer DOM contract", () => {
  test("renders steps, graph, source and is ready", () => {
    m = mountDoc(fixture("sample"));
    expect(m.root.getAttribute("data-ready")).toBe("true");
    expect(m.all("[data-testid='step']")).toHaveLength(4);
    expect(selectedStep(m)).toBe("1"); // it opens on the traced program, not the prologue
    click(m.q("[data-testid='step'][data-step-index='0']"));
    expect(selectedStep(m)).toBe("0");
    expect(m.q("[data-testid='graph']").tagName.toLowerCase()).toBe("svg");
    expect(m.all("[data-testid='node']").map((n) => n.getAttribute("data-node-id"))).toEqual([
      "p1",
      "p2",
      "p3",
      "p4",
    ]);
    expect(m.all("[data-testid='source-line']")).toHaveLength(7);
    expect(m.q("[data-testid='status']").textContent).toBe("static snapshot");
  });

  test("where torch's autograd records the backward, the step list says so and why", () => {
    const doc = fixture("sample");
    m = mountDoc(doc);
    expect(m.all("[data-testid='autograd-note']")).toHaveLength(0);
    m.cleanup();
    m = mountDoc({ ...doc, autograd: "a value that requires grad is updated in place" });
    const note = m.q("[data-testid='autograd-note']");
    expect(note.textContent).toContain("backward: torch's autograd");
    expect(note.getAttribute("title")).toBe("a value that requires grad is updated in place");
    expect(m.all("[data-testid='step']")).toHaveLength(4); // not a step: the keys skip it
  });

  test("arrow keys and j/k walk the steps", () => {
    m = mountDoc(fixture("sample"));
    key(m.root, "Home");
    expect(selectedStep(m)).toBe("0");
    key(m.root, "ArrowDown");
    expect(selectedStep(m)).toBe("1");
    key(m.root, "j");
    expect(selectedStep(m)).toBe("2");
    key(m.root, "k");
    key(m.root, "ArrowUp");
    key(m.root, "ArrowUp");
    expect(selectedStep(m)).toBe("0");
    click(m.q("[data-testid='step'][data-step-index='3']"));
    expect(selectedStep(m)).toBe("3");
    expect(m.all("[data-testid='node']").map((n) => n.getAttribute("data-node-id"))).toEqual([
      "n7",
      "n4",
      "n5",
    ]);
  });

  test("selecting a node highlights its source line and shows details", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='1']"));
    click(m.q("[data-testid='node'][data-node-id='n3'] text"));
    expect(m.q("[data-testid='node'][aria-selected='true']").getAttribute("data-node-id")).toBe(
      "n3",
    );
    const line = m.q("[data-testid='source-line'][aria-current='true']");
    expect(line.textContent).toContain("t2 = ltorch.add(t0, t1)");
    const details = m.q("[data-testid='node-details']").textContent ?? "";
    expect(details).toContain("ltorch.add");
    expect(details).toContain("t2: 4×8 f32 cpu");
    expect(details).toContain("/home/user/model.py:18");
    expect(details).toContain("block.mlp");
    expect(details).toContain("t2 = prims.add(t0, t1)");
  });

  test("selecting a source line selects its node", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='1']"));
    const line = m
      .all("[data-testid='source-line']")
      .find((l) => l.textContent?.includes("ltorch.sin"))!;
    click(line);
    expect(m.q("[data-testid='node'][aria-selected='true']").getAttribute("data-node-id")).toBe(
      "n2",
    );
    expect(line.getAttribute("aria-current")).toBe("true");
  });

  test("selection survives a pass that keeps the node", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='2']"));
    click(m.q("[data-testid='node'][data-node-id='n4']"));
    key(m.root, "ArrowDown");
    expect(m.q("[data-testid='node'][aria-selected='true']").getAttribute("data-node-id")).toBe(
      "n4",
    );
    expect(m.q("[data-testid='source-line'][aria-current='true']").textContent).toContain(
      "torch.sub(t2, y)",
    );
  });

  test("a surviving node is drawn at the same place in the next step", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='2']"));
    const before = m.q("[data-testid='node'][data-node-id='n4']").getAttribute("transform");
    const viewBefore = m.q(".viewport").getAttribute("transform");
    key(m.root, "ArrowDown");
    expect(m.q("[data-testid='node'][data-node-id='n4']").getAttribute("transform")).toBe(before);
    expect(m.q(".viewport").getAttribute("transform")).toBe(viewBefore);
  });

  test("diff classes mark nodes and lines; removed nodes are named", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='3']"));
    expect(m.q("[data-node-id='n7']").classList.contains("diff-fused")).toBe(true);
    expect(m.q("[data-node-id='n4']").classList.contains("diff-rewritten")).toBe(true);
    expect(m.all(".tx-line.diff-fused")).toHaveLength(1);
    expect(m.all(".tx-line.diff-rewritten")).toHaveLength(2);
    click(m.q("[data-testid='step'][data-step-index='2']"));
    expect(m.q("[data-testid='diff-removed']").textContent).toBe("removed (1)cos → t4");
  });

  test("a fusion expands into its members and collapses back into its node", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='3']"));
    const ids = (): (string | null)[] =>
      m!.all("[data-testid='node']").map((n) => n.getAttribute("data-node-id"));
    const toggle = (): Element =>
      m!.q("[data-testid='group'][data-group-id='g2'] [data-testid='group-toggle']");
    expect(toggle().getAttribute("aria-expanded")).toBe("false");
    expect(ids()).toEqual(["n7", "n4", "n5"]);
    const collapsedAt = m.q("[data-node-id='n7']").getAttribute("transform");
    click(toggle());
    expect(toggle().getAttribute("aria-expanded")).toBe("true");
    expect(ids()).toEqual(["n1", "n2", "n3", "n4", "n5"]);
    // the fusion stood where its first member stands
    expect(m.q("[data-node-id='n1']").getAttribute("transform")).toBe(collapsedAt);
    click(m.q("[data-node-id='n2']"));
    expect(m.q("[data-testid='node-details']").textContent).toContain("runs inTorchCompile0 (n7)");
    click(toggle());
    expect(ids()).toEqual(["n7", "n4", "n5"]);
  });

  test("searching a fusion member and pressing Enter opens the fusion", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='3']"));
    const search = m.q<HTMLInputElement>("input[data-testid='search']");
    search.value = "sin";
    search.dispatchEvent(new Event("input", { bubbles: true }));
    search.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    expect(m.q("[data-testid='node'][aria-selected='true']").getAttribute("data-node-id")).toBe(
      "n2",
    );
  });

  test("lineage links lead back to the original ops", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='3']"));
    click(m.q("[data-node-id='n7']"));
    const links = m.all("[data-testid='lineage-link']");
    expect(links.map((l) => l.textContent)).toContain("ltorch.sin (n2, step 2)");
    click(links.find((l) => l.textContent === "ltorch.sin (n2, step 2)")!);
    expect(selectedStep(m)).toBe("2");
    expect(m.q("[data-testid='node'][aria-selected='true']").getAttribute("data-node-id")).toBe(
      "n2",
    );
  });

  test("search marks matching nodes and lines", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='1']"));
    const search = m.q<HTMLInputElement>("input[data-testid='search']");
    search.value = "t1";
    search.dispatchEvent(new Event("input", { bubbles: true }));
    expect(
      m.all("[data-testid='node'].search-match").map((n) => n.getAttribute("data-node-id")),
    ).toEqual(["n2", "n3"]);
    expect(m.all("[data-testid='source-line'].search-match")).toHaveLength(2);
    search.value = "SIN";
    search.dispatchEvent(new Event("input", { bubbles: true }));
    expect(
      m.all(".search-match[data-testid='node']").map((n) => n.getAttribute("data-node-id")),
    ).toEqual(["n2"]);
    search.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    expect(m.q("[data-testid='node'][aria-selected='true']").getAttribute("data-node-id")).toBe(
      "n2",
    );
  });

  test("groups collapse and expand", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='1']"));
    const toggle = m.q("[data-testid='group'][data-group-id='g1'] [data-testid='group-toggle']");
    expect(toggle.getAttribute("aria-expanded")).toBe("true");
    click(toggle);
    expect(m.all("[data-testid='node']").map((n) => n.getAttribute("data-node-id"))).toEqual([
      "n4",
      "n5",
    ]);
    const collapsed = m.q("[data-testid='group'][data-group-id='g1']");
    expect(collapsed.classList.contains("collapsed")).toBe(true);
    expect(collapsed.textContent).toContain("block.mlp");
    click(m.q("[data-testid='group'][data-group-id='g1'] [data-testid='group-toggle']"));
    expect(m.all("[data-testid='node']")).toHaveLength(6);
  });

  test("selecting a line inside a collapsed group opens the group", () => {
    m = mountDoc(fixture("sample"));
    click(m.q("[data-testid='step'][data-step-index='1']"));
    click(m.q("[data-testid='group'][data-group-id='g1'] [data-testid='group-toggle']"));
    click(m.all("[data-testid='source-line']").find((l) => l.textContent?.includes("ltorch.mul"))!);
    expect(m.q("[data-testid='node'][aria-selected='true']").getAttribute("data-node-id")).toBe(
      "n1",
    );
  });

  test("a static host disables the executor toggles and says why", () => {
    m = mountDoc(fixture("sample"));
    const toggles = m.all("input[data-testid='executor-toggle']") as HTMLInputElement[];
    expect(toggles.map((t) => t.getAttribute("data-executor"))).toEqual([
      "torchcompile",
      "torch",
      "python",
    ]);
    expect(toggles.every((t) => t.disabled)).toBe(true);
    expect(m.q<HTMLButtonElement>("[data-testid='rerun']").disabled).toBe(true);
    expect(m.q("[data-testid='executors-unavailable']").textContent).toMatch(/no running kernel/i);
  });

  test("an executor that cannot run here is listed, greyed out, with its reason", () => {
    const doc = fixture("sample");
    doc.executors!.available = ["triton", ...doc.executors!.available];
    doc.executors!.unavailable = { triton: "triton is not installed (pip install triton)" };
    const host: ExplorerHost = {
      getDocument: () => doc,
      getStatus: () => "ready",
      subscribe: () => () => undefined,
      requestRerun: vi.fn(),
    };
    m = mountDoc(null, host);
    const triton = m.q<HTMLInputElement>("input[data-executor='triton']");
    expect(triton.disabled).toBe(true);
    expect(triton.title).toBe("unavailable: triton is not installed (pip install triton)");
    expect(triton.closest("label")!.textContent).toContain("(unavailable)");
    expect(m.q<HTMLInputElement>("input[data-executor='torchcompile']").disabled).toBe(false);
  });

  test("an interactive host reruns with the chosen executors and shows new runs", () => {
    let doc: unknown = fixture("sample");
    let status = "ready";
    const listeners = new Set<() => void>();
    const requestRerun = vi.fn();
    const host: ExplorerHost = {
      getDocument: () => doc,
      getStatus: () => status,
      subscribe: (l) => (listeners.add(l), () => listeners.delete(l)),
      requestRerun,
    };
    m = mountDoc(null, host);
    expect(m.all("[data-testid='executors-unavailable']")).toHaveLength(0);
    const tc = m.q<HTMLInputElement>(
      "input[data-testid='executor-toggle'][data-executor='torchcompile']",
    );
    expect(tc.disabled).toBe(false);
    expect(m.q<HTMLInputElement>("input[data-executor='torch']").disabled).toBe(true); // always on
    tc.checked = false;
    tc.dispatchEvent(new Event("change", { bubbles: true }));
    click(m.q("[data-testid='rerun']"));
    expect(requestRerun).toHaveBeenCalledWith(["torch", "python"]);
    expect(m.q("[data-testid='status']").textContent).toBe("running…");
    expect(m.q<HTMLButtonElement>("[data-testid='rerun']").disabled).toBe(true);

    const next = fixture("sample");
    next.runs.push({
      ...next.runs[0]!,
      id: "r3",
      median_ms: 0.044,
      compile_ms: 41.7,
      matches_eager: false,
      differs_at: "past_key_values.layers[0].keys",
      cache_misses: 2,
      fusions: [
        { name: "TorchCompile0", status: "compiled" },
        { name: "TorchCompile1", status: "warming up" },
        {
          name: "TorchCompile2",
          status: "uncompiled: torch's kernels were faster (1 µs a call against 2 µs compiled)",
        },
        { name: "TorchCompile3", status: "compiled" },
      ],
    });
    doc = next;
    status = "ready";
    listeners.forEach((l) => l());
    expect(m.q("[data-testid='status']").textContent).toBe("ready");
    const rows = m.all("[data-testid='run']");
    expect(rows).toHaveLength(3);
    const last = rows[2]!;
    expect(last.querySelector("[data-field='median_ms']")!.textContent).toBe("44.0 µs");
    expect(last.querySelector("[data-field='compile_ms']")!.textContent).toBe("41.70 ms");
    expect(rows[1]!.querySelector("[data-field='compile_ms']")!.textContent).toBe("–"); // a document from before the field
    expect(last.querySelector("[data-field='cache_misses']")!.textContent).toBe("2");
    expect(last.querySelector("[data-field='matches_eager']")!.textContent).toBe(
      "NO (past_key_values.layers[0].keys)",
    );
    expect(rows[1]!.querySelector("[data-field='matches_eager']")!.textContent).toBe("yes");
    const fusions = last.querySelector<HTMLElement>("[data-field='fusions']")!;
    expect(fusions.textContent).toBe("2 compiled, 1 warming up, 1 uncompiled");
    expect(fusions.title).toContain("TorchCompile2: uncompiled: torch's kernels were faster");
    expect(rows[1]!.querySelector("[data-field='fusions']")!.textContent).toBe("–"); // no fusion reported
    expect(last.querySelector("[data-field='executors']")!.textContent).toBe("torch, python");
    expect(rows[1]!.querySelector("[data-field='max_abs_diff']")!.textContent).toBe("2.38e-7");
    expect(rows[1]!.querySelector("[data-field='cache_hits']")!.textContent).toBe("19");
    expect(rows[1]!.querySelector<HTMLElement>("[data-field='max_abs_diff']")!.title).toBe(""); // no tolerance recorded
  });

  test("the runs table shows the first call and the tolerance of each comparison", () => {
    const doc = fixture("sample");
    const base = doc.runs[0]!;
    doc.runs = [
      {
        ...base,
        id: "r1",
        first_call: true,
        median_ms: 120,
        repeats: 1,
        max_abs_diff: null,
        matches_eager: null,
      },
      { ...base, id: "r2", tolerance: "float32: atol 1e-05, rtol 1.3e-06" },
      {
        ...base,
        id: "r3",
        max_abs_diff: 0.46,
        matches_eager: null,
        not_comparable: "random ops: values not comparable",
      },
    ];
    m = mountDoc(doc);
    const [first, rerun, random] = m.all("[data-testid='run']");
    const matches = random!.querySelector("[data-field='matches_eager']")!;
    expect(matches.textContent).toBe("random ops: values not comparable");
    expect(matches.classList.contains("tx-bad")).toBe(false);
    expect(first!.querySelector("[data-field='id']")!.textContent).toBe("r1 (first call)");
    expect(first!.querySelector("[data-field='median_ms']")!.textContent).toBe("120 ms (1 call)");
    expect(first!.querySelector("[data-field='max_abs_diff']")!.textContent).toBe("not compared");
    expect(first!.querySelector<HTMLElement>("[data-field='max_abs_diff']")!.title).toMatch(
      /rerun/,
    );
    expect(first!.querySelector("[data-field='matches_eager']")!.textContent).toBe("–");
    expect(rerun!.querySelector("[data-field='id']")!.textContent).toBe("r2");
    expect(rerun!.querySelector<HTMLElement>("[data-field='max_abs_diff']")!.title).toBe(
      "tolerance: float32: atol 1e-05, rtol 1.3e-06",
    );
    // what the user looks for first comes first: the comparison right after the run's name
    const fields = [...rerun!.querySelectorAll("td")].map((td) => td.dataset.field);
    expect(fields.slice(0, 3)).toEqual(["id", "matches_eager", "max_abs_diff"]);
  });

  test("a failure shows the error with the user's line and the completed steps", () => {
    m = mountDoc(fixture("sample-error"));
    const err = m.q("[data-testid='error']").textContent ?? "";
    expect(err).toContain("ThunderValueError");
    expect(err).toContain("cannot be broadcast");
    expect(err).toContain("/home/user/model.py:18");
    expect(err).toContain("z = x * y + torch.sin(x)");
    expect(err).toContain("3 steps completed");
    expect(m.all("[data-testid='step']")).toHaveLength(3);
    expect(m.root.getAttribute("data-ready")).toBe("true");
  });

  test("a failure before any step still shows the error", () => {
    const doc = fixture("sample-error");
    doc.steps = [];
    m = mountDoc(doc);
    expect(m.q("[data-testid='error']").textContent).toContain("ThunderValueError");
    expect(m.root.getAttribute("data-ready")).toBe("true");
  });

  test("an invalid document shows why instead of the explorer", () => {
    m = mountDoc({ schema: "thunder-trace", version: 99 });
    expect(m.q("[data-testid='error']").textContent).toMatch(/cannot be shown.*version 1/);
    expect(m.root.getAttribute("data-invalid")).toBe("true");
  });

  test("cleanup empties the element", () => {
    const mm = mountDoc(fixture("sample"));
    const el = mm.el;
    mm.cleanup();
    expect(el.childElementCount).toBe(0);
  });
});

describe("a document from the Python serializer (thunder_viz.graph, an MLP under torchcompile)", () => {
  test("walks all steps; the fusion expands into the ops it absorbed, where they stood", () => {
    const mm = mountDoc(fixture("real-mlp"));
    try {
      const steps = mm.all("[data-testid='step']");
      expect(steps.length).toBeGreaterThan(3);
      const last = steps.length - 1;
      click(mm.q(`[data-testid='step'][data-step-index='${last}']`));
      const fusionGroup = mm.q(
        "[data-testid='group'] [data-testid='group-toggle'][aria-expanded='false']",
      );
      const members = ["n148", "n154", "n176"];
      for (const id of members)
        expect(mm.all(`[data-testid='node'][data-node-id='${id}']`)).toHaveLength(0);
      click(fusionGroup);
      const at = (id: string): string | null =>
        mm.q(`[data-testid='node'][data-node-id='${id}']`).getAttribute("transform");
      const expanded = members.map(at);
      // the same ops before the fusion pass stand at the same place
      click(mm.q(`[data-testid='step'][data-step-index='${last - 2}']`));
      expect(members.map(at)).toEqual(expanded);
    } finally {
      mm.cleanup();
    }
  });

  test("a status change without a new document ends the busy state", () => {
    let status = "ready";
    const listeners = new Set<() => void>();
    const doc = fixture("sample");
    const host: ExplorerHost = {
      getDocument: () => doc,
      getStatus: () => status,
      subscribe: (l) => (listeners.add(l), () => listeners.delete(l)),
      requestRerun: () => {
        status = "running…";
        listeners.forEach((l) => l());
      },
    };
    const mm = mountDoc(null, host);
    try {
      click(mm.q("[data-testid='rerun']"));
      expect(mm.q<HTMLButtonElement>("[data-testid='rerun']").disabled).toBe(true);
      status = "error: a rerun needs a list of executor names";
      listeners.forEach((l) => l());
      expect(mm.q<HTMLButtonElement>("[data-testid='rerun']").disabled).toBe(false);
      expect(mm.q("[data-testid='status']").classList.contains("failed")).toBe(true);
    } finally {
      mm.cleanup();
    }
  });
});

describe("the maximize button", () => {
  test("gives the explorer the whole tab and Escape gives it back", () => {
    m = mountDoc(fixture("sample"));
    const button = m.q<HTMLButtonElement>("[data-testid='maximize']");
    click(button);
    expect(m.root.classList.contains("tx-maximized")).toBe(true);
    expect(button.getAttribute("aria-pressed")).toBe("true");
    m.root.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    expect(m.root.classList.contains("tx-maximized")).toBe(false);
    expect(button.getAttribute("aria-pressed")).toBe("false");
  });
});

describe("the side pane", () => {
  test("resizes from its edge with the arrow keys (and by dragging, in the browser tests)", () => {
    m = mountDoc(fixture("sample"));
    const handle = m.q<HTMLElement>("[data-testid='side-splitter']");
    expect(handle.getAttribute("role")).toBe("separator");
    handle.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowLeft", bubbles: true }));
    // jsdom has no layout: the pane measures 0 wide, so it gets the narrowest width allowed
    expect(m.q<HTMLElement>(".tx-body").style.getPropertyValue("--tx-side-w")).toBe("220px");
  });
});
