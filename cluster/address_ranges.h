// What a pool's allocatable addresses, as the plugin sends them (protocol::AddressRange: first
// and last included, sorted and disjoint), say of a block or an address: which blocks are worth
// claiming, whether a fixed claim's address is still allocatable, the first one free.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/helper_protocol.h"
#include "engine/addr/ip_address.h"

namespace shmipam::cluster {

using AddressRanges = std::vector<protocol::AddressRange>;

// Whether `block` holds an address of `ranges`; none listed: every block does.
bool serves(const AddressRanges& ranges, const engine::Cidr& block);
// Whether `ranges` lists `address`.
bool holds(const AddressRanges& ranges, const engine::IpAddress& address);
// The first address of `ranges`, in their order, that `taken` (addresses as text) lacks.
std::optional<engine::IpAddress> first_not_in(const AddressRanges& ranges,
                                              const std::set<std::string>& taken);

}  // namespace shmipam::cluster
