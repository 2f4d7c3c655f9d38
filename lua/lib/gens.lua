-- SPDX-License-Identifier: BSD-3-Clause
-- A hold's generation record, the field <owner>:gen beside the owner's
-- count (acquire.lua's header): "<generation>[,<seq>]...", the id of the
-- fresh grant that made the hold, then the 12-hex sequence prefixes of
-- the last four re-entries and decrements applied to it. Every script
-- that grants, re-enters, releases or undoes a hold reads it through
-- these, pasted where the script has the line
-- "--@include lib/gens.lua" (cmake/embed_lua.cmake). Acquires paste them
-- inside the branch that finds a hold of the caller, the plain release past
-- its common path (the last hold): a local function is a closure made on
-- every call that reaches its definition (these four cost about 0.2 us of
-- server time per call, a percent or two of a lock cycle's), and a fresh
-- grant never needs them.

-- The hold's generation ("" for a hold without one).
local function gen_of(record)
    return string.match(record, '^[^,]*')
end

-- Whether the request of sequence prefix seq was already applied to the
-- hold: a replay, which must change nothing.
local function gen_applied(record, seq)
    return string.find(record .. ',', ',' .. seq .. ',', 1, true) ~= nil
end

-- The record after applying the request of sequence prefix seq: the last
-- four sequence prefixes are kept.
local function gen_apply(record, gen, seq)
    local rest = string.sub(record, #gen + 1) .. ',' .. seq
    if #rest > 52 then rest = string.sub(rest, -52) end
    return gen .. rest
end

-- Whether the hold was made by a later fresh request than the one of
-- sequence prefix seq: that request is a late copy, and must not replace
-- the hold (its ids' sequence prefixes grow per client).
local function gen_newer_than(gen, seq)
    return #gen == 32 and tonumber(string.sub(gen, 1, 12), 16) > tonumber(seq, 16)
end
