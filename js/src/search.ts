/**
 * Search in the shown step: what a query hits (any part of an op's torch or symbol name, a value,
 * a parameter path or a module scope, in any case; whole words as an option) and the list of
 * matches under the search box.
 *
 * Layer: front-end core; imports the schema types, scopes.ts and the safe DOM helpers.
 */
import { h } from "./dom";
import { nodeText } from "./panels";
import type { Step, TraceNode } from "./schema";
import { groupChains, isDel } from "./scopes";

/** The query as searched: lower case, a dot at either end dropped (a path being typed:
 * `transformer.h.` finds what `transformer.h` does). */
export function normalizeQuery(query: string): string {
  return query
    .trim()
    .toLowerCase()
    .replace(/^\.+|\.+$/g, "");
}

/** Matches listed under the search box (all are marked in the graph and the source). */
export const SEARCH_LIST_MAX = 50;

/**
 * What a search hits: any name holding the query, in any case (`norm` finds `layer_norm`, `LN`
 * finds `ln_1.weight`), or with `wholeWord` only where it stands between non-word characters
 * (`weight` finds `ln_1.weight`, not `weights`; `transformer.h.1` not `transformer.h.10`).
 * `q` is lower case.
 */
export function nameMatcher(q: string, wholeWord: boolean): (name: string) => boolean {
  if (!wholeWord) return (name) => name.includes(q);
  const escaped = q.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const re = new RegExp(`(^|[^a-z0-9_])${escaped}($|[^a-z0-9_])`);
  return (name) => re.test(name);
}

export interface SearchEntry {
  node: TraceNode;
  names: string[];
}

/**
 * What a search can hit, per drawn node: its op and label, its module path and those of the
 * module groups around it, and the names (and parameter paths) of the values it reads and makes.
 * A query hits a name only as whole dot-separated parts, so `t18` is not `t180` and `h.0.attn`
 * finds `transformer.h.0.attn`; wrapping each name in dots makes that a plain `includes`.
 */
export function searchIndex(step: Step): SearchEntry[] {
  const chains = groupChains(step);
  const lower = (name: string): string => name.toLowerCase();
  return step.nodes
    .filter((n) => !isDel(n))
    .map((n) => {
      const names = [n.op, n.label];
      if (n.source?.module_path) names.push(n.source.module_path);
      for (const g of n.group === null ? [] : (chains.get(n.group) ?? []))
        if (g.kind === "module") names.push(g.label);
      for (const v of [...n.inputs, ...n.outputs]) {
        names.push(v.name);
        if (v.path) names.push(v.path);
      }
      return { node: n, names: names.map(lower) };
    });
}

/** The list under the search box: the first matches as buttons, then how many more. */
export function searchResultItems(
  doc: Document,
  matches: string[],
  nodes: Map<string, TraceNode>,
  query: string,
): HTMLElement[] {
  const shown = matches.slice(0, SEARCH_LIST_MAX).flatMap((id, i) => {
    const n = nodes.get(id);
    if (!n) return [];
    const module = n.source?.module_path;
    return [
      h(
        doc,
        "li",
        { role: "presentation" },
        h(
          doc,
          "button",
          {
            type: "button",
            class: "tx-search-result",
            "data-testid": "search-result",
            "data-match-index": i,
            role: "option",
            "aria-selected": "false",
            title: n.op,
          },
          h(doc, "span", { class: "tx-search-op" }, nodeText(n)),
          module ? h(doc, "span", { class: "tx-muted" }, ` ${module}`) : null,
        ),
      ),
    ];
  });
  const more = matches.length - shown.length;
  if (query.trim() && !matches.length)
    shown.push(h(doc, "li", { class: "tx-muted" }, "no op, value or module by that name"));
  else if (more > 0) shown.push(h(doc, "li", { class: "tx-muted" }, `and ${more} more`));
  return shown;
}
