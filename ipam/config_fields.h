// Typed readers of the network configuration's JSON fields, each answering a CNI error that
// names the field and says what it must be (plugin/netconf.cpp and ipam/pool_config.cpp assemble
// them).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/addr/range.h"
#include "engine/state/network_config.h"

namespace shmipam::ipam::config_fields {

using nlohmann::json;

// ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$ : the reference skel's pattern for ids and network names.
bool matches_cni_pattern(const std::string& s);
// The network's name as the CNI spec allows it (code 7 naming what is wrong).
Status validate_network_name(const std::string& name);

// "<field> must be <want>" (code 6: the config cannot be decoded).
Error type_error(const std::string& field, const char* want);
// obj[key] as a string; "" when absent; an error when present and not a string.
Expected<std::string> opt_string(const json& obj, const char* key, const std::string& where);
// One {subnet, rangeStart, rangeEnd, gateway} object of a range set.
Expected<engine::RangeSpec> parse_range_spec(const json& j, const std::string& where);
// "ranges": an array of range sets, each an array of ranges, validated as host-local does.
Expected<std::vector<engine::RangeSet>> parse_range_sets(const json& j, const std::string& where);
// An array of address strings (not yet parsed).
Expected<std::vector<std::string>> parse_ip_list(const json& j, const std::string& where);
// "reuseDelay" in milliseconds: a number of seconds, or a duration string ("500ms", "30s", "1m").
Expected<uint64_t> parse_delay_ms(const json& j);
// A block prefix length in [lo, hi]; `def` when absent.
Expected<uint8_t> parse_block_size(const json& ipam, const char* key, int lo, int hi, uint8_t def);

// The state's policy and durability knobs into `network`, with the plugin's defaults:
// reuseDelay, blockSize, blockSizeV6, durability, durabilityBackend, reclaimOnReboot,
// journalMaxSegments, bootIdFile (the plugin's config, and an operator's tool creating a state
// the plugin will open).
Status parse_state_knobs(const json& ipam, engine::NetworkConfig& network);

}  // namespace shmipam::ipam::config_fields
