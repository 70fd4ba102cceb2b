// A YAML document as JSON, for the kubeconfig (kube/kubeconfig.h). libyaml, as pools/ reads pool
// objects (docs/dependencies.md says why libyaml); kube/ includes nothing of pools/, so this is
// its own small reader with the same scalar rules (YAML 1.2's core schema, as Kubernetes' YAML
// reader gives them).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace shmipam::kube {

// The first document of `text` as JSON (null for an empty text). Code 7 naming `where`, the line
// and libyaml's reason when the text is not YAML. Never throws.
Expected<nlohmann::json> yaml_to_json(std::string_view text, const std::string& where);

}  // namespace shmipam::kube
