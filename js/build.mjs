// Builds the committed bundles into thunder_viz/static (pip install needs no Node):
//   widget.js      ESM for anywidget's _esm
//   standalone.js  IIFE for the static HTML snapshot (window.ThunderExplorer)
//   explorer.css   styles for both
// With --lab it builds, instead, the JupyterLab extension's input in lib/ (see build:labextension):
//   lib/plugin.js     ESM of src/plugin.ts; JupyterLab's packages stay imports (shared at run time)
//   lib/mime.js, lib/extension.js   re-export its mime renderer extension and its commands plugin
// which `build-labextension` then wraps into the federated bundle in thunder_viz/labextension.
// No bundle loads anything from the network or from a second file.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "thunder_viz", "static");
mkdirSync(out, { recursive: true });

// Note [Compile on load]: V8 compiles a function when it is first called, so the first render
// compiled most of the explorer's code as it ran: about 11 ms of its main-thread time on a
// 12-layer GPT-2, a seventh of it. This comment (an explicit compile hint, Chromium 136+; other
// engines ignore it) has each bundle compiled whole when it loads, and the first render compiles
// nothing. Where the browser compiles a script in the background (the widget's module, which
// anywidget imports: its import costs the main thread no more) that is free; an inline script
// (the HTML snapshot's) compiles on the main thread, about 6 ms more than before, as it also
// compiles the code the first render does not run. webpack.config.cjs puts it on the JupyterLab
// extension's chunks (its minifier drops the comment esbuild writes into lib/plugin.js).
const COMPILE_ON_LOAD = "//# allFunctionsCalledOnLoad";

const common = {
  bundle: true,
  minify: true,
  target: ["es2020"],
  legalComments: "none",
  logLevel: "warning",
  banner: { js: COMPILE_ON_LOAD },
};

if (process.argv.includes("--lab")) {
  const lib = join(here, "lib");
  mkdirSync(lib, { recursive: true });
  await esbuild.build({
    ...common,
    entryPoints: [join(here, "src", "plugin.ts")],
    format: "esm",
    external: ["@jupyterlab/*", "@lumino/*"],
    outfile: join(lib, "plugin.js"),
  });
  // The core's package.json (its shared packages and their versions) for build-labextension.
  mkdirSync(join(lib, "core"), { recursive: true });
  copyFileSync(
    join(here, "node_modules", "@jupyterlab", "core-meta", "core.package.json"),
    join(lib, "core", "package.json"),
  );
  writeFileSync(
    join(lib, "mime.js"),
    'export { rendererExtension as default } from "./plugin.js";\n',
  );
  writeFileSync(
    join(lib, "extension.js"),
    'export { commandsPlugin as default } from "./plugin.js";\n',
  );
  console.log(`lib/plugin.js: ${(statSync(join(lib, "plugin.js")).size / 1024).toFixed(1)} KiB`);
} else {
  await esbuild.build({
    ...common,
    entryPoints: [join(here, "src", "widget.ts")],
    format: "esm",
    outfile: join(out, "widget.js"),
  });
  await esbuild.build({
    ...common,
    entryPoints: [join(here, "src", "standalone.ts")],
    format: "iife",
    outfile: join(out, "standalone.js"),
  });
  copyFileSync(join(here, "src", "explorer.css"), join(out, "explorer.css"));

  for (const f of ["widget.js", "standalone.js", "explorer.css"]) {
    console.log(`${f}: ${(statSync(join(out, f)).size / 1024).toFixed(1)} KiB`);
  }
}
