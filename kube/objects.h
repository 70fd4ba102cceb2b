// What the helper reads of the API server's objects, as the protocol's answers
// (kube/pod_protocol.h): a Pod's uid, labels, annotations, owners and node; a StatefulSet's
// deletion, replicas and first ordinal. Pure functions over the parsed JSON.
//
// An object that is not what was asked (another kind or name, a field of the wrong type) is
// code 999 naming `where` (the URL) and the field: no API server answers so, and no guess is
// made from it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "kube/pod_protocol.h"

namespace shmipam::kube {

// A Pod named `name` in `ns`.
Expected<protocol::PodAnswer> decode_pod(const nlohmann::json& pod, const std::string& ns,
                                         const std::string& name, const std::string& where);

// A StatefulSet named `name` in `ns` (exists: true): spec.replicas 1 and spec.ordinals.start 0
// when absent, as the API server defaults them.
Expected<protocol::StatefulSetAnswer> decode_statefulset(const nlohmann::json& set,
                                                         const std::string& ns,
                                                         const std::string& name,
                                                         const std::string& where);

// A KubeVirt VirtualMachine named `name` in `ns` (exists: true), and whether it is being deleted.
Expected<protocol::VmAnswer> decode_vm(const nlohmann::json& vm, const std::string& ns,
                                       const std::string& name, const std::string& where);

}  // namespace shmipam::kube
