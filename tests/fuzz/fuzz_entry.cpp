// Fuzz target (libFuzzer) for everything that reads untrusted bytes:
//  1. parse_entry never crashes or throws, whatever is stored;
//  2. the strict JSON validator agrees with nlohmann::json::accept, with two documented
//     differences: a lone surrogate escape such as "\ud800" (JSON's grammar allows it,
//     nlohmann refuses it) and a NUL byte (nlohmann takes it as the end of the input and
//     accepts "3\0garbage"; dlq refuses it), and numbers beyond a double's range such as
//     7E777 (valid JSON that nlohmann refuses with out_of_range.406; Python reads inf);
//  3. any bytes sent as a payload come back byte-exact from the envelope.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "dlq/entry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);

  // 1.
  const dlq::Entry parsed = dlq::parse_entry(input);
  if (parsed.raw != input || parsed.id.empty()) std::abort();

  // 2.
  const bool ours = dlq::detail::json::is_exact_value(input);
  const bool padded = !input.empty() && (dlq::detail::json::is_ws(input.front()) ||
                                         dlq::detail::json::is_ws(input.back()));
  if (!padded && input.find('\0') == std::string::npos) {
    const bool theirs = nlohmann::json::accept(input);
    if (theirs && !ours) std::abort();
    if (ours && !theirs) {
      try {
        (void)nlohmann::json::parse(input);
        std::abort();  // accept() and parse() disagree: impossible
      } catch (const nlohmann::json::out_of_range& e) {
        if (e.id != 406) std::abort();  // number overflow is the only range error
      } catch (const nlohmann::json::parse_error&) {
        if (input.find("\\u") == std::string::npos) std::abort();  // only surrogate escapes
      }
    }
  }

  // 3.
  dlq::Failure f;
  f.error = input;  // any bytes as error text, too: must still give valid JSON
  dlq::detail::envelope_input in;
  in.queue = "q";
  in.payload = input;
  in.failure = &f;
  in.worker = "w";
  in.id = "id-1";
  std::string envelope;
  dlq::detail::write_envelope(envelope, in);
  const dlq::Entry back = dlq::parse_entry(envelope);
  if (!back.ok() || back.payload != input || back.id != "id-1") std::abort();
  // A payload embedded verbatim (JSON, whitespace around it allowed) may hold what nlohmann
  // refuses (see 2.); any other payload is base64, so the envelope must be JSON nlohmann reads.
  const bool embedded = dlq::detail::shape_of(input) != dlq::detail::payload_shape::binary;
  if (!nlohmann::json::accept(envelope) && !embedded) std::abort();
  return 0;
}
