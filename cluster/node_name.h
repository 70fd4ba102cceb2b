// What a node's name may be in cluster mode: the name of its Kubernetes Node object, which the
// API server accepts only as an RFC 1123 subdomain (lower-case letters, digits, '-' and '.', each
// dot-separated label 1 to 63 characters starting and ending with a letter or digit, 253 in
// all). The store, `cluster gc`'s Node list and the node pass all compare names byte for byte: a
// name no Node can have ("Node-A", a host name's FQDN in capitals) is never in the list a gc is
// given, so a gc would take that live node's blocks.
#pragma once

#include <string>
#include <string_view>

namespace shmipam::cluster {

// Whether `name` is an RFC 1123 subdomain.
bool is_node_name(std::string_view name);
// "" when `name` is one; else why not, saying what a node name may hold (for code 7 messages).
std::string node_name_problem(std::string_view name);

}  // namespace shmipam::cluster
