import { describe, expect, test } from "vitest";
import { errorBox, nodeDetails, placeText, valueText } from "../src/panels";
import { validateDocument, type ErrorInfo, type TraceDocument } from "../src/schema";
import { fixture } from "./helpers";

const TORCH_LINEAR = "/site-packages/torch/nn/modules/linear.py";

/** The sample document with a parameter path on x and a call site on the first computation node. */
function withNames(): TraceDocument {
  const doc = fixture("sample");
  const step = doc.steps[1]!;
  const node = step.nodes[0]!;
  node.inputs[0]!.path = "block.mlp.fc.weight";
  node.source = {
    file: TORCH_LINEAR,
    line: 134,
    function: "Linear.forward",
    module_path: "block.mlp.fc",
    code: "return F.linear(input, self.weight, self.bias)",
    call_site: { file: "Cell In[3]", line: 5, function: "forward", code: "y = self.fc(x)" },
  };
  return doc;
}

function rows(el: HTMLElement[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const row of el[1]!.querySelectorAll(".tx-row"))
    out[row.querySelector("dt")!.textContent!] = row.querySelector("dd")!.textContent!;
  return out;
}

describe("names and places a person recognises", () => {
  test("the reader keeps a value's path and a source's call site", () => {
    const result = validateDocument(JSON.parse(JSON.stringify(withNames())));
    expect(result.ok, JSON.stringify(result)).toBe(true);
    if (!result.ok) return;
    const node = result.doc.steps[1]!.nodes[0]!;
    expect(node.inputs[0]!.path).toBe("block.mlp.fc.weight");
    expect(node.inputs[1]!.path).toBeNull();
    expect(node.source!.call_site).toEqual({
      file: "Cell In[3]",
      line: 5,
      function: "forward",
      code: "y = self.fc(x)",
    });
    expect(result.doc.steps[1]!.nodes[1]!.source?.call_site ?? null).toBeNull();
  });

  test("the reader refuses a call site without its line", () => {
    const doc = withNames() as unknown as {
      steps: { nodes: { source: Record<string, unknown> }[] }[];
    };
    delete (doc.steps[1]!.nodes[0]!.source.call_site as Record<string, unknown>).line;
    expect(validateDocument(doc).ok).toBe(false);
  });

  test("a parameter is shown by its module path", () => {
    const ref = {
      name: "t_fc_weight",
      shape: [3, 4],
      dtype: "f32",
      device: "cpu",
      kind: "tensor" as const,
    };
    expect(valueText({ ...ref, path: "fc.weight" })).toBe("fc.weight: 3×4 f32 cpu");
    expect(valueText(ref)).toBe("t_fc_weight: 3×4 f32 cpu");
  });

  test("a notebook cell is placed as IPython's tracebacks place it", () => {
    expect(placeText("Cell In[3]", 5)).toBe("Cell In[3], line 5");
    expect(placeText("/home/user/model.py", 18)).toBe("/home/user/model.py:18");
  });

  test("the error box places a cell's line the same way", () => {
    const err: ErrorInfo = {
      type: "RuntimeError",
      message: "inner dimensions differ",
      stage: "tracing",
      user_frame: { file: "Cell In[4]", line: 3, function: "f", code: "return c @ b" },
    };
    const box = errorBox(document, err, 0);
    expect(box.querySelector(".tx-file")!.textContent).toBe("Cell In[4], line 3");
  });

  test("details show the user's call site, the module path and torch's line", () => {
    const doc = withNames();
    const step = doc.steps[1]!;
    const details = nodeDetails(document, step.nodes[0]!, step, undefined, [], [], null, null);
    const shown = rows(details);
    expect(shown["user source"]).toBe("Cell In[3], line 5 in forwardy = self.fc(x)");
    expect(shown["module"]).toBe("block.mlp.fc");
    expect(shown["torch source"]).toBe(
      `${TORCH_LINEAR}:134 in Linear.forwardreturn F.linear(input, self.weight, self.bias)`,
    );
    const input = details[1]!.querySelector(".tx-values li")!;
    expect(input.textContent).toMatch(/^block\.mlp\.fc\.weight: /);
    expect(input.getAttribute("title")).toBe("x");
  });

  test("an op in the user's own code has no torch line", () => {
    const doc = fixture("sample");
    const step = doc.steps[1]!;
    const shown = rows(nodeDetails(document, step.nodes[0]!, step, undefined, [], [], null, null));
    expect(shown["user source"]).toBe("/home/user/model.py:18 in forwardz = x * y + torch.sin(x)");
    expect("torch source" in shown).toBe(false);
  });
});

describe("names wrap at . and _", () => {
  test("a parameter's path may break after each . and _, never mid-word; its text is unchanged", () => {
    const doc = fixture("sample");
    const step = doc.steps[1]!;
    const node = { ...step.nodes[0]!, op: "torch_layer_norm_with_stats", label: "layer_norm" };
    node.inputs = [{ ...node.inputs[0]!, path: "transformer.h.0.ln_1.weight" }];
    const els = nodeDetails(document, node, step, undefined, [], [], null, null);
    const item = els[1]!.querySelector(".tx-values li")!;
    expect(item.textContent).toContain("transformer.h.0.ln_1.weight");
    const pieces = [...item.childNodes]
      .filter((c) => c.nodeName !== "WBR")
      .map((c) => c.textContent);
    expect(pieces.slice(0, 6)).toEqual(["transformer.", "h.", "0.", "ln_", "1.", pieces[5]]);
    expect(pieces[5]!.startsWith("weight")).toBe(true);
    expect(item.querySelectorAll("wbr").length).toBeGreaterThanOrEqual(5);
    const symbol = els[1]!.querySelector("[data-testid='node-symbol']")!;
    expect(symbol.textContent).toBe("torch_layer_norm_with_stats");
    expect(els[0]!.textContent).toContain("layer_norm"); // the title: the torch name
  });
});
