// Kubernetes objects (already as JSON: YAML is converted first) to pools/objects.h values,
// validated as Spiderpool's webhook validates them. Unknown fields are ignored; a malformed
// object is an error that names its kind, name and what to fix.
#pragma once

#include <nlohmann/json.hpp>
#include <variant>

#include "base/status.h"
#include "pools/objects.h"

namespace shmipam::pools {

struct IgnoredObject {};  // another kind: not ours to read
using DecodedObject =
    std::variant<IpPool, Subnet, ReservedIp, NamespaceObject, NodeObject, IgnoredObject>;

Expected<DecodedObject> decode_object(const nlohmann::json& j, const Origin& origin);

}  // namespace shmipam::pools
