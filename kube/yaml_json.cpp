#include "kube/yaml_json.h"

#include "base/yaml_json.h"

namespace shmipam::kube {

namespace {

// A kubeconfig has a few hundred nodes and nests under ten deep; one of many clusters a few
// thousand nodes. 100,000 nodes stops an alias bomb in time and memory; one document is read
// (kubectl reads the first).
base::YamlBounds kubeconfig_bounds() {
    base::YamlBounds b;
    b.of = "a kubeconfig";
    b.max_depth = 64;
    b.max_nodes = 100'000;
    b.max_documents = 1;
    return b;
}

}  // namespace

Expected<nlohmann::json> yaml_to_json(std::string_view text, const std::string& where) {
    auto read = base::yaml_to_json(text, kubeconfig_bounds());
    if (!read.problem.empty()) return make_error(Code::kInvalidConfig, where + " " + read.problem);
    return read.documents.empty() ? nlohmann::json() : read.documents.front();
}

}  // namespace shmipam::kube
