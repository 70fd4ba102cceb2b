// A kubeconfig's YAML as JSON (kube/kubeconfig.h), through the one converter (base/yaml_json.h)
// with a kubeconfig's bounds.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace shmipam::kube {

// The first document of `text` as JSON (null for an empty text). Code 7 naming `where`, the line
// and libyaml's reason when the text is not YAML, or the bound it passed. Never throws.
Expected<nlohmann::json> yaml_to_json(std::string_view text, const std::string& where);

}  // namespace shmipam::kube
