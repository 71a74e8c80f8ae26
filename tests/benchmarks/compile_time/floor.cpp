// compile_time.sh's floor: nlohmann/json alone, an empty main. Every other translation unit
// here is measured against it.
#include <nlohmann/json.hpp>

int main() {
  return 0;
}
