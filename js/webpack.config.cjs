// Merged into @jupyterlab/builder's config by build-labextension. Module ids by order of use,
// not by a hash of each module's identifier: the federation container's identifier holds the
// checkout's absolute path, so hashed ids made every checkout build a different remoteEntry.
module.exports = { optimization: { moduleIds: "natural", chunkIds: "natural" } };
