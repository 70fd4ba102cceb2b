// shmipamctl: the operator's tool. A thin shell over engine/inspect: it maps a network's state
// read-only, renders it, and exits 0 (clean), 1 (violations found) or 2 (cannot read).
#include <CLI/CLI.hpp>
#include <iostream>

#include "engine/inspect.h"
#include "engine/network_store.h"
#include "shm/process_identity.h"
#include "tools/render_text.h"

using namespace shmipam;

namespace {

constexpr int kExitViolations = 1;
constexpr int kExitCannotRead = 2;

Expected<std::unique_ptr<engine::NetworkStore>> open_network(const std::string& run_dir,
                                                             const std::string& network) {
    if (network.empty() || network.find('/') != std::string::npos || network[0] == '.') {
        return make_error(Code::kInvalidConfig, "invalid network name \"" + network + "\"");
    }
    return engine::NetworkStore::open_existing(run_dir + "/" + network, shm::Access::kReadOnly);
}

int cannot_read(const Error& e) {
    std::cerr << "shmipamctl: " << e.msg << (e.details.empty() ? "" : " (" + e.details + ")")
              << "\n";
    return kExitCannotRead;
}

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << "shmipamctl: " << e.what() << "\n";
        return kExitCannotRead;
    }
}

int run(int argc, char** argv) {
    CLI::App app{"shmipamctl: inspect and check shmipam's address state on this node"};
    app.require_subcommand(1);
    std::string run_dir = "/run/shmipam";
    std::string network;
    bool as_json = false;
    app.add_option("--run-dir", run_dir, "where the arenas live (the ipam runDir)")
        ->capture_default_str();

    auto* dump_cmd = app.add_subcommand("dump", "every address that is not free, and to whom");
    dump_cmd->add_option("network", network, "network name")->required();
    dump_cmd->add_flag("--json", as_json, "print JSON");

    auto* verify_cmd = app.add_subcommand("verify", "check every invariant of the network's state");
    verify_cmd->add_option("network", network, "network name")->required();
    verify_cmd->add_flag("--json", as_json, "print JSON");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : kExitCannotRead;
    }

    auto store = open_network(run_dir, network);
    if (!store) return cannot_read(store.error());
    if (dump_cmd->parsed()) {
        auto d = engine::dump(**store);
        if (!d) return cannot_read(d.error());
        std::cout << (as_json ? tools::dump_to_json(*d).dump(2) + "\n" : tools::dump_to_table(*d));
        return 0;
    }
    auto rep = engine::verify(**store);
    if (!rep) return cannot_read(rep.error());
    std::cout << (as_json ? tools::verify_to_json(*rep).dump(2) + "\n"
                          : tools::verify_to_text(*rep));
    return rep->violations.empty() ? 0 : kExitViolations;
}
