// What Kubernetes accepts as an object's name (apimachinery's validation), for names that come
// from outside the API: an operator's `shmipamctl claims create --pod`, a `claims import`
// record. A claim for a name no pod can have would never be bound, and under policy "never"
// would be held for good.
//   namespaces: a DNS-1123 label: 1-63 of a-z 0-9 '-', starting and ending with a-z or 0-9;
//   pods (and KubeVirt VMs): a DNS-1123 subdomain: 1-253 characters, labels of a-z 0-9 '-'
//   (each starting and ending with a-z or 0-9) joined by '.'.
#pragma once

#include <optional>
#include <string>

namespace shmipam::kube {

inline constexpr size_t kMaxLabelBytes = 63;
inline constexpr size_t kMaxSubdomainBytes = 253;

// Why `name` is not a DNS-1123 label, in Kubernetes' words; nullopt when it is one.
std::optional<std::string> not_a_dns_label(const std::string& name);
// Why `name` is not a DNS-1123 subdomain; nullopt when it is one.
std::optional<std::string> not_a_dns_subdomain(const std::string& name);

}  // namespace shmipam::kube
