#pragma once

// `rnnserve inspect FILE [--json] [--architecture A]`: the architecture rnnserve runs for a model
// file, read locally (no server) with the importer the server uses: inputs, outputs, layers with
// sizes, activations and masking semantics, and where each layer can run on a GPU node and why.

namespace rnnserve::server {

// argv from `inspect` on (argv[0] is "inspect"). Returns the exit code: 0 described (or --help),
// 1 the file was refused (the error on stderr), 2 bad arguments.
int RunInspect(int argc, char** argv);

}  // namespace rnnserve::server
