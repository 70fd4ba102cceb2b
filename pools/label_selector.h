// metav1.LabelSelector matching as Kubernetes defines it (LabelSelectorAsSelector): every
// matchLabels pair and every matchExpressions requirement must hold; an empty selector matches
// everything. In: the key is present with one of the values; NotIn: the key is absent or its
// value is none of them; Exists / DoesNotExist: the key is present / absent.
#pragma once

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "pools/objects.h"

namespace shmipam::pools {

bool matches(const LabelSelector& selector, const Labels& labels);

// Decodes a selector object; code 7 for what Kubernetes would refuse (an unknown operator, In
// without values, Exists with values), the message names `where`.
Expected<LabelSelector> decode_selector(const nlohmann::json& j, const std::string& where);

// "key=value,key2 in (a,b)" style text for explain output.
std::string to_string(const LabelSelector& selector);

}  // namespace shmipam::pools
