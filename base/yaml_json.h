// YAML documents as JSON, for pool files (pools/pool_dir.h) and kubeconfigs (kube/kubeconfig.h):
// libyaml (docs/dependencies.md says why), with the plain scalars Kubernetes' YAML reader gives
// (YAML 1.2's core schema: null, booleans, integers; quoted and block scalars are strings), and
// bounds the caller sets, so that a document made to exhaust a process (an alias bomb, deep
// nesting) is refused in time and memory rather than followed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace shmipam::base {

struct YamlBounds {
    std::string of;                   // what they bound, for messages: "one pool file"
    int max_depth = 64;               // nesting: also the converter's recursion (its stack)
    size_t max_nodes = 100'000;       // nodes after alias expansion (libyaml shares an aliased
                                      // node, the conversion copies it): the alias bomb's bound
    size_t max_aliases = SIZE_MAX;    // alias uses in one document
    size_t max_documents = SIZE_MAX;  // documents read (a `---` starts the next)
};

struct YamlDocuments {
    // In order, null for an empty document; on a problem, those read before it.
    std::vector<nlohmann::json> documents;
    // Why reading stopped, or "": "is not valid YAML: <libyaml's reason> at line N", "expands to
    // more than 1,000,000 YAML nodes (the bound for one pool file)", "nests deeper than ...",
    // "uses more than ... YAML aliases ...". The caller names the text before it.
    std::string problem;
};

YamlDocuments yaml_to_json(std::string_view text, const YamlBounds& bounds);

}  // namespace shmipam::base
