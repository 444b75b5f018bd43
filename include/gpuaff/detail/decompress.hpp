// SPDX-License-Identifier: Apache-2.0
#pragma once
// xz and gzip decoding for tar roots shipped compressed (fixtures/NAME.tar.xz):
// `root=FILE.tar.xz` or `root=FILE.tar.gz` is read as the tar inside it, with
// nothing written anywhere and no program or library run. The library has no
// runtime dependency, so it cannot link liblzma or zlib, and spawning `xz -dc`
// would make a topology read depend on a program being installed (and fork
// inside whatever process loads it: a Python interpreter, slurmstepd). The
// decoders here are small because they need only what xz(1) and gzip(1)
// write: xz streams of LZMA2 blocks (no BCJ or delta filters) with a CRC32,
// CRC64 or no check, and gzip members of DEFLATE data.
//
// Each decoder stops at `max_out` bytes of output (a compression bomb is
// refused, not unpacked) and at the first inconsistency (a bad header, a
// check that does not match, data cut short); time is linear in the output.

#include "gpuaff/config.hpp"  // first: the C++20 check

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuaff {
inline namespace v0 {
namespace detail {

enum class Compression { none, gzip, xz };

/// The compression `bytes` start with, by their magic number.
inline Compression compression_of(std::string_view bytes) {
  if (bytes.size() >= 6 && bytes.substr(0, 6) == std::string_view("\xFD" "7zXZ\0", 6)) return Compression::xz;
  if (bytes.size() >= 2 && bytes[0] == '\x1F' && bytes[1] == '\x8B') return Compression::gzip;
  return Compression::none;
}

/// Why a decoder stopped: empty when it did not; `too_large` when the output
/// would pass its limit.
struct DecodeFailure {
  std::string_view what{};
  bool too_large = false;
  explicit operator bool() const { return !what.empty() || too_large; }
};

namespace decode {

template <std::uint64_t Poly, class T>
constexpr std::array<T, 256> crc_table() {
  std::array<T, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    T c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? static_cast<T>(Poly) ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
inline constexpr auto crc32_table = crc_table<0xEDB88320u, std::uint32_t>();
inline constexpr auto crc64_table = crc_table<0xC96C5795D7870F42ull, std::uint64_t>();

/// CRC-32 (gzip, xz headers) and CRC-64/ECMA-182 (xz's default check).
inline std::uint32_t crc32(std::string_view data) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (char ch : data) c = crc32_table[(c ^ static_cast<unsigned char>(ch)) & 0xFF] ^ (c >> 8);
  return ~c;
}
inline std::uint64_t crc64(std::string_view data) {
  std::uint64_t c = ~std::uint64_t{0};
  for (char ch : data) c = crc64_table[(c ^ static_cast<unsigned char>(ch)) & 0xFF] ^ (c >> 8);
  return ~c;
}

inline std::uint32_t le32(std::string_view b, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<std::size_t>(i)]);
  return v;
}

/// The output of one decoder, within its limit.
struct Output {
  std::string& out;
  std::uint64_t max;
  bool room(std::uint64_t n) const { return n <= max && out.size() <= max - n; }
  /// Appends `len` bytes copied from `dist` bytes back (they may overlap what
  /// is appended); the caller checked the distance and the room.
  void repeat(std::size_t dist, std::size_t len) {
    if (dist == 1) {
      out.append(len, out.back());
      return;
    }
    std::size_t to = out.size();
    out.resize(to + len);
    char* p = out.data();
    for (std::size_t i = 0; i < len; ++i) p[to + i] = p[to + i - dist];
  }
};

// ---- gzip: DEFLATE (RFC 1951) in gzip members (RFC 1952) --------------------

class Inflater {
 public:
  Inflater(std::string_view in, std::size_t at, Output& out) : in_(in), pos_(at), out_(out) {}

  /// Decodes one DEFLATE stream; start_ is where its output begins (matches
  /// reach no further back).
  DecodeFailure run() {
    start_ = out_.out.size();
    bool last = false;
    while (!last) {
      int fin = bits(1), type = bits(2);
      if (fin < 0 || type < 0) return cut();
      last = fin == 1;
      DecodeFailure f;
      if (type == 0) f = stored();
      else if (type == 1) f = fixed();
      else if (type == 2) f = dynamic();
      else return {"a DEFLATE block of the reserved type 3"};
      if (f) return f;
    }
    return {};
  }
  /// The first byte after the stream (its last bits are dropped: a stream ends on a byte).
  std::size_t end() const { return pos_; }

 private:
  struct Huffman {
    std::array<std::uint16_t, 16> count{};
    std::array<std::uint16_t, 288> symbol{};
  };

  static DecodeFailure cut() { return {"the compressed data ends early (the file is cut short)"}; }

  int bits(int n) {
    while (have_ < n) {
      if (pos_ >= in_.size()) return -1;
      buf_ |= static_cast<std::uint32_t>(static_cast<unsigned char>(in_[pos_++])) << have_;
      have_ += 8;
    }
    int v = static_cast<int>(buf_ & ((1u << n) - 1));
    buf_ >>= n;
    have_ -= n;
    return v;
  }

  /// Builds a canonical code; <0 over-subscribed, >0 incomplete, 0 complete.
  static int build(Huffman& h, const std::uint8_t* lengths, int n) {
    h.count.fill(0);
    for (int s = 0; s < n; ++s) ++h.count[lengths[s]];
    if (h.count[0] == n) return 0;
    int left = 1;
    for (int len = 1; len < 16; ++len) {
      left = left * 2 - h.count[static_cast<std::size_t>(len)];
      if (left < 0) return left;
    }
    std::array<std::uint16_t, 16> offs{};
    for (int len = 1; len < 15; ++len)
      offs[static_cast<std::size_t>(len + 1)] = static_cast<std::uint16_t>(offs[static_cast<std::size_t>(len)] + h.count[static_cast<std::size_t>(len)]);
    for (int s = 0; s < n; ++s)
      if (lengths[s] != 0) h.symbol[offs[lengths[s]]++] = static_cast<std::uint16_t>(s);
    return left;
  }

  /// One symbol of `h`; -1 when the input ends, -2 for a code not in `h`.
  int symbol(const Huffman& h) {
    int code = 0, first = 0, index = 0;
    for (std::size_t len = 1; len < 16; ++len) {
      int b = bits(1);
      if (b < 0) return -1;
      code |= b;
      int count = h.count[len];
      if (code - count < first) return h.symbol[static_cast<std::size_t>(index + (code - first))];
      index += count;
      first = (first + count) << 1;
      code <<= 1;
    }
    return -2;
  }

  DecodeFailure stored() {
    buf_ = 0;
    have_ = 0;
    if (in_.size() - pos_ < 4) return cut();
    unsigned len = static_cast<unsigned char>(in_[pos_]) | static_cast<unsigned>(static_cast<unsigned char>(in_[pos_ + 1])) << 8;
    unsigned nlen = static_cast<unsigned char>(in_[pos_ + 2]) | static_cast<unsigned>(static_cast<unsigned char>(in_[pos_ + 3])) << 8;
    pos_ += 4;
    if (len != (~nlen & 0xFFFFu)) return {"a stored DEFLATE block whose length check is wrong"};
    if (in_.size() - pos_ < len) return cut();
    if (!out_.room(len)) return {{}, true};
    out_.out.append(in_.substr(pos_, len));
    pos_ += len;
    return {};
  }

  DecodeFailure codes(const Huffman& lens, const Huffman& dists) {
    static constexpr std::array<std::uint16_t, 29> lbase{3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                                         31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static constexpr std::array<std::uint8_t, 29> lext{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                                       2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    static constexpr std::array<std::uint16_t, 30> dbase{1,   2,   3,   4,   5,   7,    9,    13,   17,   25,
                                                         33,  49,  65,  97,  129, 193,  257,  385,  513,  769,
                                                         1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
    static constexpr std::array<std::uint8_t, 30> dext{0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                                       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    while (true) {
      int s = symbol(lens);
      if (s == -1) return cut();
      if (s < 0) return {"a DEFLATE code that its table does not hold"};
      if (s < 256) {
        if (!out_.room(1)) return {{}, true};
        out_.out.push_back(static_cast<char>(s));
        continue;
      }
      if (s == 256) return {};
      s -= 257;
      if (s >= 29) return {"a DEFLATE length code out of range"};
      int extra = bits(lext[static_cast<std::size_t>(s)]);
      if (extra < 0) return cut();
      std::size_t len = lbase[static_cast<std::size_t>(s)] + static_cast<std::size_t>(extra);
      int d = symbol(dists);
      if (d == -1) return cut();
      if (d < 0 || d >= 30) return {"a DEFLATE distance code out of range"};
      extra = bits(dext[static_cast<std::size_t>(d)]);
      if (extra < 0) return cut();
      std::size_t dist = dbase[static_cast<std::size_t>(d)] + static_cast<std::size_t>(extra);
      if (dist > out_.out.size() - start_) return {"a DEFLATE match that reaches before the start of the data"};
      if (!out_.room(len)) return {{}, true};
      out_.repeat(dist, len);
    }
  }

  DecodeFailure fixed() {
    std::array<std::uint8_t, 288 + 30> l{};
    for (std::size_t s = 0; s < 288; ++s) l[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    for (std::size_t s = 288; s < l.size(); ++s) l[s] = 5;
    Huffman lens, dists;
    build(lens, l.data(), 288);
    build(dists, l.data() + 288, 30);
    return codes(lens, dists);
  }

  DecodeFailure dynamic() {
    static constexpr std::array<std::uint8_t, 19> order{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    int nlen = bits(5), ndist = bits(5), ncode = bits(4);
    if (nlen < 0 || ndist < 0 || ncode < 0) return cut();
    nlen += 257;
    ndist += 1;
    ncode += 4;
    if (nlen > 286 || ndist > 30) return {"a DEFLATE block with too many codes"};
    std::array<std::uint8_t, 320> l{};
    for (int i = 0; i < ncode; ++i) {
      int b = bits(3);
      if (b < 0) return cut();
      l[order[static_cast<std::size_t>(i)]] = static_cast<std::uint8_t>(b);
    }
    Huffman lencode, distcode;
    if (build(lencode, l.data(), 19) != 0) return {"a DEFLATE code-length table that is not complete"};
    l.fill(0);
    for (int i = 0; i < nlen + ndist;) {
      int s = symbol(lencode);
      if (s == -1) return cut();
      if (s < 0) return {"a DEFLATE code length that its table does not hold"};
      if (s < 16) {
        l[static_cast<std::size_t>(i++)] = static_cast<std::uint8_t>(s);
        continue;
      }
      int repeat = 0;
      std::uint8_t value = 0;
      if (s == 16) {
        if (i == 0) return {"a DEFLATE repeat with nothing to repeat"};
        value = l[static_cast<std::size_t>(i - 1)];
        repeat = bits(2);
        repeat = repeat < 0 ? -1 : 3 + repeat;
      } else if (s == 17) {
        repeat = bits(3);
        repeat = repeat < 0 ? -1 : 3 + repeat;
      } else {
        repeat = bits(7);
        repeat = repeat < 0 ? -1 : 11 + repeat;
      }
      if (repeat < 0) return cut();
      if (i + repeat > nlen + ndist) return {"DEFLATE code lengths that run past their table"};
      while (repeat-- > 0) l[static_cast<std::size_t>(i++)] = value;
    }
    if (l[256] == 0) return {"a DEFLATE block without an end code"};
    int e = build(lencode, l.data(), nlen);
    if (e < 0 || (e > 0 && nlen - lencode.count[0] != 1)) return {"a DEFLATE literal table that is not complete"};
    e = build(distcode, l.data() + nlen, ndist);
    if (e < 0 || (e > 0 && ndist - distcode.count[0] != 1)) return {"a DEFLATE distance table that is not complete"};
    return codes(lencode, distcode);
  }

  std::string_view in_;
  std::size_t pos_;
  Output& out_;
  std::size_t start_ = 0;
  std::uint32_t buf_ = 0;
  int have_ = 0;
};

/// Every gzip member of `in`, one after the other (as gzip -dc reads them).
inline DecodeFailure gunzip(std::string_view in, Output& out) {
  std::size_t at = 0;
  do {
    if (in.size() - at < 18) return {"a gzip member shorter than its header and trailer (the file is cut short)"};
    if (in[at] != '\x1F' || in[at + 1] != '\x8B') return {"data after the last gzip member that is not one"};
    if (in[at + 2] != 8) return {"a gzip member not compressed with DEFLATE"};
    auto flags = static_cast<unsigned char>(in[at + 3]);
    if ((flags & 0xE0) != 0) return {"a gzip header with reserved flags set"};
    std::size_t p = at + 10;
    if ((flags & 4) != 0) {  // FEXTRA
      if (in.size() - p < 2) return {"a gzip header cut short"};
      p += 2 + (static_cast<unsigned char>(in[p]) | static_cast<std::size_t>(static_cast<unsigned char>(in[p + 1])) << 8);
    }
    for (unsigned bit : {8u, 16u}) {  // FNAME, FCOMMENT: NUL-terminated
      if ((flags & bit) == 0) continue;
      std::size_t nul = p < in.size() ? in.find('\0', p) : std::string_view::npos;
      if (nul == std::string_view::npos) return {"a gzip header cut short"};
      p = nul + 1;
    }
    if ((flags & 2) != 0) p += 2;  // FHCRC
    if (p > in.size()) return {"a gzip header cut short"};
    std::size_t begin = out.out.size();
    Inflater inflate(in, p, out);
    if (auto f = inflate.run()) return f;
    at = inflate.end();
    if (in.size() - at < 8) return {"a gzip member without its trailer (the file is cut short)"};
    std::string_view produced = std::string_view(out.out).substr(begin);
    if (le32(in, at) != crc32(produced)) return {"a gzip member whose CRC-32 does not match its data (damaged)"};
    if (le32(in, at + 4) != static_cast<std::uint32_t>(produced.size()))
      return {"a gzip member whose size does not match its data (damaged)"};
    at += 8;
  } while (at < in.size());
  return {};
}

// ---- xz: LZMA2 in xz streams ------------------------------------------------

class Lzma2 {
 public:
  explicit Lzma2(Output& out) : out_(out) {}

  /// Decodes the LZMA2 data from `at` to its end marker; `at` ends after it.
  DecodeFailure run(std::string_view in, std::size_t& at) {
    bool need_dict = true, need_props = true;
    while (true) {
      if (at >= in.size()) return cut();
      auto control = static_cast<unsigned char>(in[at++]);
      if (control == 0x00) return {};
      if (control == 0x01 || control == 0x02) {  // uncompressed
        if (in.size() - at < 2) return cut();
        std::size_t size = be16(in, at) + 1u;
        at += 2;
        if (control == 0x01) dict_start_ = out_.out.size(), need_dict = false;
        else if (need_dict) return {"LZMA2 data that does not start with a dictionary reset"};
        if (in.size() - at < size) return cut();
        if (!out_.room(size)) return {{}, true};
        out_.out.append(in.substr(at, size));
        at += size;
        continue;
      }
      if (control < 0x80) return {"an LZMA2 chunk of an unknown kind"};
      if (in.size() - at < 4) return cut();
      std::size_t unpacked = ((static_cast<std::size_t>(control) & 0x1F) << 16) + be16(in, at) + 1u;
      std::size_t packed = be16(in, at + 2) + 1u;
      at += 4;
      unsigned reset = (control >> 5) & 3u;
      if (reset == 3) dict_start_ = out_.out.size(), need_dict = false;
      else if (need_dict) return {"LZMA2 data that does not start with a dictionary reset"};
      if (reset >= 2) {
        if (at >= in.size()) return cut();
        unsigned d = static_cast<unsigned char>(in[at++]);
        if (d >= 9 * 5 * 5) return {"LZMA2 properties out of range"};
        lc_ = d % 9;
        d /= 9;
        lp_ = d % 5;
        pb_ = d / 5;
        if (lc_ + lp_ > 4) return {"LZMA2 properties out of range (lc + lp above 4)"};
        need_props = false;
      } else if (need_props) {
        return {"an LZMA2 chunk before its properties"};
      }
      if (reset >= 1) reset_state();
      if (in.size() - at < packed) return cut();
      if (auto f = chunk(in.substr(at, packed), unpacked)) return f;
      at += packed;
    }
  }

 private:
  static constexpr std::uint16_t half = 1024;  // probabilities are 11 bits

  static DecodeFailure cut() { return {"the compressed data ends early (the file is cut short)"}; }
  static DecodeFailure corrupt() { return {"LZMA data that does not decode (the file is damaged)"}; }
  static std::size_t be16(std::string_view b, std::size_t at) {
    return static_cast<std::size_t>(static_cast<unsigned char>(b[at])) << 8 | static_cast<unsigned char>(b[at + 1]);
  }

  // The range decoder of one chunk.
  std::string_view rc_in_;
  std::size_t rc_pos_ = 0;
  std::uint32_t range_ = 0, code_ = 0;
  bool overrun_ = false;

  std::uint32_t next_byte() {
    if (rc_pos_ >= rc_in_.size()) {
      overrun_ = true;
      return 0;
    }
    return static_cast<unsigned char>(rc_in_[rc_pos_++]);
  }
  void normalize() {
    if (range_ < (1u << 24)) {
      range_ <<= 8;
      code_ = (code_ << 8) | next_byte();
    }
  }
  unsigned bit(std::uint16_t& p) {
    std::uint32_t bound = (range_ >> 11) * p;
    unsigned b = 0;
    if (code_ < bound) {
      p = static_cast<std::uint16_t>(p + ((2048u - p) >> 5));
      range_ = bound;
    } else {
      p = static_cast<std::uint16_t>(p - (p >> 5));
      code_ -= bound;
      range_ -= bound;
      b = 1;
    }
    normalize();
    return b;
  }
  std::uint32_t direct(unsigned n) {
    std::uint32_t r = 0;
    while (n-- > 0) {
      range_ >>= 1;
      code_ -= range_;
      std::uint32_t t = 0u - (code_ >> 31);
      code_ += range_ & t;
      normalize();
      r = (r << 1) + (t + 1);
    }
    return r;
  }
  unsigned tree(std::uint16_t* p, unsigned nbits) {
    unsigned m = 1;
    for (unsigned i = 0; i < nbits; ++i) m = (m << 1) + bit(p[m]);
    return m - (1u << nbits);
  }
  unsigned reverse(std::uint16_t* p, unsigned nbits) {
    unsigned m = 1, s = 0;
    for (unsigned i = 0; i < nbits; ++i) {
      unsigned b = bit(p[m]);
      m = (m << 1) + b;
      s |= b << i;
    }
    return s;
  }

  struct LenCoder {
    std::uint16_t choice = half, choice2 = half;
    std::array<std::array<std::uint16_t, 8>, 16> low{}, mid{};
    std::array<std::uint16_t, 256> high{};
    void reset() {
      choice = choice2 = half;
      for (auto& a : low) a.fill(half);
      for (auto& a : mid) a.fill(half);
      high.fill(half);
    }
  };
  unsigned length(LenCoder& c, unsigned pos_state) {
    if (bit(c.choice) == 0) return tree(c.low[pos_state].data(), 3);
    if (bit(c.choice2) == 0) return 8 + tree(c.mid[pos_state].data(), 3);
    return 16 + tree(c.high.data(), 8);
  }

  void reset_state() {
    literal_.assign(std::size_t{0x300} << (lc_ + lp_), half);
    is_match_.fill(half);
    is_rep_.fill(half);
    is_rep_g0_.fill(half);
    is_rep_g1_.fill(half);
    is_rep_g2_.fill(half);
    is_rep0_long_.fill(half);
    for (auto& a : slot_) a.fill(half);
    special_.fill(half);
    align_.fill(half);
    len_.reset();
    rep_len_.reset();
    state_ = 0;
    rep0_ = rep1_ = rep2_ = rep3_ = 0;
  }

  unsigned char back(std::size_t dist) const { return static_cast<unsigned char>(out_.out[out_.out.size() - dist]); }

  DecodeFailure chunk(std::string_view data, std::size_t unpacked) {
    rc_in_ = data;
    rc_pos_ = 0;
    overrun_ = false;
    if (data.size() < 5 || data[0] != 0) return corrupt();
    range_ = 0xFFFFFFFFu;
    code_ = 0;
    rc_pos_ = 1;
    for (int i = 0; i < 4; ++i) code_ = (code_ << 8) | next_byte();
    if (code_ == range_) return corrupt();
    if (literal_.size() != (std::size_t{0x300} << (lc_ + lp_))) return corrupt();  // new lc/lp without a state reset
    if (!out_.room(unpacked)) return {{}, true};
    const std::size_t end = out_.out.size() + unpacked;
    const unsigned pb_mask = (1u << pb_) - 1, lp_mask = (1u << lp_) - 1;
    while (out_.out.size() < end) {
      if (overrun_) return corrupt();
      std::size_t pos = out_.out.size() - dict_start_;
      unsigned pos_state = static_cast<unsigned>(pos) & pb_mask;
      if (bit(is_match_[state_ * 16 + pos_state]) == 0) {
        unsigned prev = pos > 0 ? back(1) : 0;
        std::uint16_t* probs =
            &literal_[0x300 * (((static_cast<unsigned>(pos) & lp_mask) << lc_) + (prev >> (8 - lc_)))];
        unsigned s = 1;
        if (state_ >= 7) {
          if (rep0_ >= pos) return corrupt();
          unsigned match = back(rep0_ + 1);
          do {
            unsigned mb = (match >> 7) & 1;
            match <<= 1;
            unsigned b = bit(probs[((1 + mb) << 8) + s]);
            s = (s << 1) | b;
            if (mb != b) break;
          } while (s < 0x100);
        }
        while (s < 0x100) s = (s << 1) | bit(probs[s]);
        out_.out.push_back(static_cast<char>(s - 0x100));
        state_ = state_ < 4 ? 0 : state_ < 10 ? state_ - 3 : state_ - 6;
        continue;
      }
      unsigned len = 0;
      if (bit(is_rep_[state_]) != 0) {
        if (pos == 0) return corrupt();
        if (bit(is_rep_g0_[state_]) == 0) {
          if (bit(is_rep0_long_[state_ * 16 + pos_state]) == 0) {  // one byte at rep0
            if (rep0_ >= pos) return corrupt();
            state_ = state_ < 7 ? 9 : 11;
            out_.out.push_back(static_cast<char>(back(rep0_ + 1)));
            continue;
          }
        } else {
          std::uint32_t dist = 0;
          if (bit(is_rep_g1_[state_]) == 0) {
            dist = rep1_;
          } else {
            if (bit(is_rep_g2_[state_]) == 0) {
              dist = rep2_;
            } else {
              dist = rep3_;
              rep3_ = rep2_;
            }
            rep2_ = rep1_;
          }
          rep1_ = rep0_;
          rep0_ = dist;
        }
        len = length(rep_len_, pos_state);
        state_ = state_ < 7 ? 8 : 11;
      } else {
        rep3_ = rep2_;
        rep2_ = rep1_;
        rep1_ = rep0_;
        len = length(len_, pos_state);
        state_ = state_ < 7 ? 7 : 10;
        unsigned slot = tree(slot_[len < 3 ? len : 3].data(), 6);
        if (slot < 4) {
          rep0_ = slot;
        } else {
          unsigned nbits = (slot >> 1) - 1;
          std::uint32_t dist = (2u | (slot & 1u)) << nbits;
          if (slot < 14) {
            dist += reverse(&special_[dist - slot], nbits);
          } else {
            dist += direct(nbits - 4) << 4;
            dist += reverse(align_.data(), 4);
          }
          rep0_ = dist;
        }
      }
      len += 2;
      if (rep0_ >= pos) return corrupt();  // before the dictionary, or the end marker LZMA2 never writes
      if (len > end - out_.out.size()) return corrupt();
      out_.repeat(std::size_t{rep0_} + 1, len);
    }
    if (overrun_ || rc_pos_ != rc_in_.size()) return corrupt();
    return {};
  }

  Output& out_;
  std::size_t dict_start_ = 0;
  unsigned lc_ = 0, lp_ = 0, pb_ = 0;
  unsigned state_ = 0;
  std::uint32_t rep0_ = 0, rep1_ = 0, rep2_ = 0, rep3_ = 0;
  std::vector<std::uint16_t> literal_;
  std::array<std::uint16_t, 12 * 16> is_match_{}, is_rep0_long_{};
  std::array<std::uint16_t, 12> is_rep_{}, is_rep_g0_{}, is_rep_g1_{}, is_rep_g2_{};
  std::array<std::array<std::uint16_t, 64>, 4> slot_{};
  std::array<std::uint16_t, 115> special_{};
  std::array<std::uint16_t, 16> align_{};
  LenCoder len_, rep_len_;
};

/// A variable-length integer of xz (7 bits a byte, at most 9 bytes); false when malformed.
inline bool varint(std::string_view in, std::size_t& at, std::uint64_t& v) {
  v = 0;
  for (int i = 0; i < 9; ++i) {
    if (at >= in.size()) return false;
    auto b = static_cast<unsigned char>(in[at++]);
    v |= static_cast<std::uint64_t>(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) return b != 0 || i == 0;
  }
  return false;
}

/// Every xz stream of `in` (as xz -dc reads concatenated streams).
inline DecodeFailure unxz(std::string_view in, Output& out) {
  const DecodeFailure cut{"the xz data ends early (the file is cut short)"};
  std::size_t at = 0;
  while (true) {
    constexpr std::string_view magic("\xFD" "7zXZ\0", 6);
    if (in.substr(at, 6) != magic.substr(0, std::min<std::size_t>(6, in.size() - at)) || (at > 0 && in.size() - at < 6))
      return {"data after the last xz stream that is not one"};
    if (in.size() - at < 12) return cut;
    std::string_view flags = in.substr(at + 6, 2);
    if (le32(in, at + 8) != crc32(flags)) return {"an xz stream header whose CRC-32 is wrong (damaged)"};
    if (flags[0] != 0 || (static_cast<unsigned char>(flags[1]) & 0xF0) != 0) return {"an xz stream header with unknown flags"};
    const unsigned check = static_cast<unsigned char>(flags[1]);
    const std::size_t check_size = check == 0 ? 0 : 4u << ((check - 1) / 3);
    at += 12;
    std::size_t blocks = 0;
    while (true) {  // blocks, up to the index
      if (at >= in.size()) return cut;
      if (in[at] == 0) break;
      std::size_t header_size = (static_cast<std::size_t>(static_cast<unsigned char>(in[at])) + 1) * 4;
      if (in.size() - at < header_size) return cut;
      std::string_view header = in.substr(at, header_size);
      if (le32(header, header_size - 4) != crc32(header.substr(0, header_size - 4)))
        return {"an xz block header whose CRC-32 is wrong (damaged)"};
      auto bflags = static_cast<unsigned char>(header[1]);
      if ((bflags & 0x3C) != 0) return {"an xz block header with unknown flags"};
      std::size_t h = 2;
      std::string_view body = header.substr(0, header_size - 4);
      std::uint64_t packed = 0, unpacked = 0, id = 0, props = 0;
      if ((bflags & 0x40) != 0 && !varint(body, h, packed)) return {"a malformed xz block header"};
      if ((bflags & 0x80) != 0 && !varint(body, h, unpacked)) return {"a malformed xz block header"};
      if ((bflags & 3) != 0) return {"an xz block with a filter before LZMA2 (BCJ or delta); recompress with plain xz"};
      if (!varint(body, h, id) || !varint(body, h, props)) return {"a malformed xz block header"};
      if (id != 0x21) return {"an xz block not compressed with LZMA2; recompress with plain xz"};
      if (props != 1 || h >= body.size()) return {"a malformed xz block header"};
      if (static_cast<unsigned char>(body[h++]) > 40) return {"an xz block whose LZMA2 dictionary size is out of range"};
      for (; h < body.size(); ++h)
        if (body[h] != 0) return {"a malformed xz block header (padding that is not zero)"};
      at += header_size;
      std::size_t data_at = at, begin = out.out.size();
      Lzma2 lzma(out);
      if (auto f = lzma.run(in, at)) return f;
      if ((bflags & 0x40) != 0 && packed != at - data_at) return {"an xz block whose compressed size is not the one its header gives"};
      if ((bflags & 0x80) != 0 && unpacked != out.out.size() - begin) return {"an xz block whose size is not the one its header gives"};
      while ((at - data_at) % 4 != 0) {
        if (at >= in.size()) return cut;
        if (in[at++] != 0) return {"an xz block whose padding is not zero"};
      }
      if (in.size() - at < check_size) return cut;
      std::string_view produced = std::string_view(out.out).substr(begin);
      if (check == 1 && le32(in, at) != crc32(produced)) return {"an xz block whose CRC-32 does not match its data (damaged)"};
      if (check == 4 && (le32(in, at) | static_cast<std::uint64_t>(le32(in, at + 4)) << 32) != crc64(produced))
        return {"an xz block whose CRC-64 does not match its data (damaged)"};
      at += check_size;
      ++blocks;
    }
    std::size_t index_at = at++;  // the index: its records, padding, CRC-32
    std::uint64_t records = 0, v = 0;
    if (!varint(in, at, records) || records != blocks) return {"an xz index that does not list the stream's blocks"};
    for (std::uint64_t i = 0; i < 2 * records; ++i)
      if (!varint(in, at, v)) return cut;
    while ((at - index_at) % 4 != 0) {
      if (at >= in.size()) return cut;
      if (in[at++] != 0) return {"an xz index whose padding is not zero"};
    }
    if (in.size() - at < 4 + 12) return cut;
    if (le32(in, at) != crc32(in.substr(index_at, at - index_at))) return {"an xz index whose CRC-32 is wrong (damaged)"};
    at += 4;
    if (in.substr(at + 10, 2) != "YZ" || in.substr(at + 8, 2) != flags ||
        le32(in, at) != crc32(in.substr(at + 4, 6)))
      return {"an xz stream footer that does not match its header (damaged)"};
    at += 12;
    while (at < in.size() && in[at] == 0) ++at;  // stream padding
    if (at == in.size()) return {};
  }
}

}  // namespace decode

/// Decompresses `in` (xz or gzip) into `out`, at most `max_out` bytes.
inline DecodeFailure decompress(Compression kind, std::string_view in, std::string& out, std::uint64_t max_out) {
  decode::Output o{out, max_out};
  if (kind == Compression::xz) return decode::unxz(in, o);
  if (kind == Compression::gzip) return decode::gunzip(in, o);
  out.assign(in);
  return {};
}

}  // namespace detail
}  // namespace v0
}  // namespace gpuaff
