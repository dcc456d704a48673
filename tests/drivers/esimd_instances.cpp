// Prints the registered names of every ESIMD kernel instance the launchers can pick for one entry
// file (sycl/esimd_policy.hpp, all_instance_names), one per line. Used by esimd_aot.sh.
//   g++ -std=c++17 -I sycl -I include tests/drivers/esimd_instances.cpp -o esimd_instances
//   ./esimd_instances esimd/sddmm.hpp
#include <cstdio>

#include "esimd_policy.hpp"

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s esimd/<op>.hpp\n", argv[0]);
    return 2;
  }
  const auto names = gnnsparse::esimd_policy::all_instance_names(argv[1]);
  for (const auto &n : names) std::printf("%s\n", n.c_str());
  return names.empty() ? 1 : 0;
}
