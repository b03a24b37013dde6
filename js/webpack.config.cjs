// Merged into @jupyterlab/builder's config by build-labextension. Module ids by order of use,
// not by a hash of each module's identifier: the federation container's identifier holds the
// checkout's absolute path, so hashed ids made every checkout build a different remoteEntry.
// Each chunk starts with the compile hint of Note [Compile on load] in build.mjs, added after
// minifying (which would drop it) and before the content hashes are taken.
const { BannerPlugin, Compilation } = require("webpack");

module.exports = {
  optimization: { moduleIds: "natural", chunkIds: "natural" },
  plugins: [
    new BannerPlugin({
      banner: "//# allFunctionsCalledOnLoad",
      raw: true,
      test: /\.js(\?|$)/,
      stage: Compilation.PROCESS_ASSETS_STAGE_OPTIMIZE_SIZE + 1,
    }),
  ],
};
