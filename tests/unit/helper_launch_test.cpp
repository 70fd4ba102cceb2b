// How the plugin starts a helper (ipam/helper_exec.h): through the loader shipped beside it when
// there is one, else by itself; and what an ELF file's PT_INTERP names (base/elf_interpreter.h),
// for the message when a helper's loader is missing.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "base/elf_interpreter.h"
#include "base/shipped_libraries.h"
#include "ipam/helper_exec.h"
#include "tests/support/temp_dir.h"

namespace shmipam::testing {
namespace {

TEST(HelperLaunch, AHelperWithoutAShippedLoaderBesideItIsExecdByItself) {
    TempDir dir;
    write_file(dir.sub("shmipam-kube"), "");
    const auto launch = ipam::helper_launch(dir.sub("shmipam-kube"));
    EXPECT_FALSE(launch.through_shipped_loader);
    EXPECT_EQ(launch.file, dir.sub("shmipam-kube"));
    EXPECT_EQ(launch.argv, std::vector<std::string>{dir.sub("shmipam-kube")});
}

TEST(HelperLaunch, AHelperWithTheShippedLoaderBesideItRunsThroughItOnTheShippedLibrariesAlone) {
    TempDir dir;
    write_file(dir.sub("shmipam-kube"), "");
    const std::string lib = dir.sub(kShippedLibDir);
    ::mkdir(lib.c_str(), 0755);
    const std::string loader = lib + "/" + kShippedLoader;
    write_file(loader, "");
    // Not executable: not a loader to start anything with.
    ::chmod(loader.c_str(), 0644);
    EXPECT_FALSE(ipam::helper_launch(dir.sub("shmipam-kube")).through_shipped_loader);
    ::chmod(loader.c_str(), 0755);
    const auto launch = ipam::helper_launch(dir.sub("shmipam-kube"));
    EXPECT_TRUE(launch.through_shipped_loader);
    EXPECT_EQ(launch.file, loader);
    const std::vector<std::string> argv = {
        loader,    "--inhibit-cache",       "--library-path",       lib,
        "--argv0", dir.sub("shmipam-kube"), dir.sub("shmipam-kube")};
    EXPECT_EQ(launch.argv, argv);
}

TEST(ElfInterpreter, ADynamicExecutableNamesItsLoaderAndAnythingElseNone) {
    // This test binary is dynamic: the loader the kernel mapped for it is the one it names.
    const auto self = elf_interpreter("/proc/self/exe");
    ASSERT_TRUE(self.has_value());
    EXPECT_TRUE(std::filesystem::exists(*self)) << *self;
    EXPECT_NE(self->find("ld-linux"), std::string::npos) << *self;
    TempDir dir;
    write_file(dir.sub("script"), "#!/bin/sh\nexit 0\n");
    EXPECT_FALSE(elf_interpreter(dir.sub("script")).has_value());
    EXPECT_FALSE(elf_interpreter(dir.sub("missing")).has_value());
    // The loader itself is an ELF file with no PT_INTERP.
    EXPECT_FALSE(elf_interpreter(*self).has_value());
}

}  // namespace
}  // namespace shmipam::testing
