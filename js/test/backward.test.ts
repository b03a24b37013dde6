import { afterEach, describe, expect, test } from "vitest";
import { click, fixture, key, mountDoc, type Mounted } from "./helpers";

// backward-gelu.json: thunder_viz.graph's document of `gelu(a * b).sum()` under torchcompile
// after `.backward()`. Steps 2-7 computation: n8 mul, n14 gelu, n16 sum, fused into n51
// (TorchCompile0, group g0) from step 6. Steps 8-10 backward: n21 from n16's gradient, n22..n37
// from n14's, n40 and n41 from n8's, fused into n87 (TorchCompile1, group g1) from step 9.

let m: Mounted | null = null;
afterEach(() => {
  m?.cleanup();
  m = null;
});

function selectedStep(mm: Mounted): string | null {
  return mm.q("[data-testid='step'][aria-selected='true']").getAttribute("data-step-index");
}

function selectedNode(mm: Mounted): string | null {
  return mm.q("[data-testid='node'][aria-selected='true']").getAttribute("data-node-id");
}

/** The links of one row of the details panel; null when the row is absent. */
function rowLinks(mm: Mounted, label: string): HTMLElement[] | null {
  const dt = mm.all("[data-testid='node-details'] dt").find((d) => d.textContent === label);
  if (!dt) return null;
  return Array.from(
    dt.parentElement!.querySelectorAll<HTMLElement>("[data-testid='lineage-link']"),
  );
}

function marked(mm: Mounted): (string | null)[] {
  return mm.all("[data-testid='node'].search-match").map((n) => n.getAttribute("data-node-id"));
}

function showStep(mm: Mounted, i: number): void {
  click(mm.q(`[data-testid='step'][data-step-index='${i}']`));
}

const GELU_GRAD = [22, 23, 24, 25, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37].map((i) => `n${i}`);

describe("backward steps link to the forward ops they differentiate", () => {
  test("the fixture has computation then backward steps", () => {
    const doc = fixture("backward-gelu");
    expect(doc.steps.map((s) => s.kind)).toEqual([
      "prologue",
      "prologue",
      ...Array(6).fill("computation"),
      ...Array(3).fill("backward"),
    ]);
  });

  test("a backward node's 'gradient of' links the forward node in the last computation step", () => {
    m = mountDoc(fixture("backward-gelu"));
    showStep(m, 8);
    click(m.q("[data-testid='node'][data-node-id='n22']"));
    expect(rowLinks(m, "original op")).toBeNull();
    expect(rowLinks(m, "gradient computed by")).toBeNull();
    const links = rowLinks(m, "gradient of")!;
    expect(links.map((l) => l.textContent)).toEqual(["torch.nn.functional.gelu (n14, step 7)"]);
    // n14 runs inside the collapsed fusion n51 there: the jump opens the fusion and selects it
    expect(m.all("[data-testid='node'][data-node-id='n14']")).toHaveLength(0);
    click(links[0]!);
    expect(selectedStep(m)).toBe("7");
    expect(selectedNode(m)).toBe("n14");
    expect(document.activeElement).toBe(m.root); // the keys still walk the steps
    expect(m.q("[data-testid='node-details'] h3").textContent).toContain("gelu");
    expect(m.q("[data-testid='node-symbol']").textContent).toBe("torch.nn.functional.gelu");
  });

  test("a backward fusion links every forward op it differentiates", () => {
    m = mountDoc(fixture("backward-gelu"));
    showStep(m, 10);
    click(m.q("[data-testid='node'][data-node-id='n87']"));
    expect(rowLinks(m, "gradient of")!.map((l) => l.textContent)).toEqual([
      "torch.sum (n16, step 7)",
      "torch.nn.functional.gelu (n14, step 7)",
      "torch.mul (n8, step 7)",
    ]);
  });

  test("a computation node lists the backward nodes computing its gradient", () => {
    m = mountDoc(fixture("backward-gelu"));
    showStep(m, 5);
    click(m.q("[data-testid='node'][data-node-id='n8']"));
    const links = rowLinks(m, "gradient computed by")!;
    expect(links.map((l) => l.textContent)).toEqual([
      "TorchCompile1 (n87, step 10)",
      "torch.mul (n40, step 10)",
      "torch.mul (n41, step 10)",
    ]);
    // the forward "original op" row is unchanged
    expect(rowLinks(m, "original op")!.map((l) => l.textContent)).toEqual([
      "ltorch.mul (n8, step 2)",
    ]);
    // selecting a forward node marks nothing in its own step
    expect(marked(m)).toEqual([]);
    click(links[2]!);
    expect(selectedStep(m)).toBe("10");
    expect(selectedNode(m)).toBe("n41");
  });

  test("a forward fusion lists the gradients of its members; the prologue lists none", () => {
    m = mountDoc(fixture("backward-gelu"));
    showStep(m, 7);
    click(m.q("[data-testid='node'][data-node-id='n51']"));
    const ids = rowLinks(m, "gradient computed by")!.map((l) => l.getAttribute("data-node-id"));
    expect(ids).toEqual(["n87", "n21", ...GELU_GRAD, "n40", "n41"]);
    showStep(m, 0);
    click(m.q("[data-testid='node'][data-node-id='n1']"));
    expect(rowLinks(m, "gradient computed by")).toBeNull();
  });

  test("a document without backward steps has no 'gradient computed by' row", () => {
    m = mountDoc(fixture("sample"));
    showStep(m, 1);
    click(m.q("[data-testid='node'][data-node-id='n3']"));
    expect(rowLinks(m, "gradient computed by")).toBeNull();
    expect(rowLinks(m, "original op")).not.toBeNull();
  });

  test("moving to a backward step with a forward node selected marks its gradient ops", () => {
    m = mountDoc(fixture("backward-gelu"));
    showStep(m, 7);
    click(m.q("[data-testid='node'][data-node-id='n51']"));
    click(m.q("[data-testid='group'][data-group-id='g0'] [data-testid='group-toggle']"));
    click(m.q("[data-testid='node'][data-node-id='n8']"));
    key(m.root, "ArrowDown");
    expect(selectedStep(m)).toBe("8");
    expect(marked(m)).toEqual(["n40", "n41"]);
    expect(m.all("[data-testid='source-line'].search-match")).toHaveLength(2);
    expect(m.q("[data-testid='gradient-marks']").textContent).toContain(
      "2 ops computing the gradient of torch.mul (n8)",
    );
    key(m.root, "ArrowDown"); // the marks follow through the backward steps
    expect(marked(m)).toEqual(["n87"]); // the collapsed fusion stands for n40, n41
    key(m.root, "ArrowUp");
    click(m.q("[data-testid='node'][data-node-id='n22']")); // a new selection drops them
    expect(marked(m)).toEqual([]);
    expect(m.all("[data-testid='gradient-marks']")).toHaveLength(0);
  });

  test("the marks go when leaving the backward steps or pressing Escape", () => {
    m = mountDoc(fixture("backward-gelu"));
    showStep(m, 5);
    click(m.q("[data-testid='node'][data-node-id='n14']"));
    showStep(m, 8);
    expect(marked(m)).toEqual(GELU_GRAD);
    key(m.root, "Escape");
    expect(marked(m)).toEqual([]);
    showStep(m, 5);
    click(m.q("[data-testid='node'][data-node-id='n16']"));
    showStep(m, 8);
    expect(marked(m)).toEqual(["n21"]);
    showStep(m, 5);
    expect(marked(m)).toEqual([]);
    showStep(m, 8); // the forward selection did not survive the step change: nothing marked
    expect(marked(m)).toEqual([]);
  });

  test("a search still counts only its own matches next to the marks", () => {
    m = mountDoc(fixture("backward-gelu"));
    showStep(m, 5);
    click(m.q("[data-testid='node'][data-node-id='n8']"));
    showStep(m, 8);
    const search = m.q<HTMLInputElement>("input[data-testid='search']");
    search.value = "erf";
    search.dispatchEvent(new Event("input", { bubbles: true }));
    expect(m.q("[data-testid='search-count']").textContent).toBe("1 match");
    expect(marked(m)).toEqual(["n23", "n40", "n41"]);
  });
});
