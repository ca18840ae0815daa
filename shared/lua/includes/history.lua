--[[ include history: history_append(old, more, keep)
  Input:  old  a stored error history (JSON array text, or false when absent)
          more a JSON array of notes to add, newest last   keep  how many notes to keep
  Output: the JSON array of old's notes then more's, the newest `keep` of them. An old
          history that cannot be read is replaced by more's notes (the claim would have
          dead-lettered it as corrupt); a note that cannot be encoded again (a damaged
          one holding NaN or 1e400, which cjson reads but will not write) is dropped, so
          the call never fails. Each note is an object, so encoding one never turns an
          empty array into `{}`. ]]
local function history_append(old, more, keep)
  local notes = {}
  for _, text in ipairs({ old or '[]', more }) do
    local ok, list = pcall(cjson.decode, text)
    if ok and type(list) == 'table' then
      for _, note in ipairs(list) do
        if type(note) == 'table' then
          notes[#notes + 1] = note
        end
      end
    end
  end
  local out = {}
  for i = 1, #notes do
    local ok, text = pcall(cjson.encode, notes[i])
    if ok then
      out[#out + 1] = text
    end
  end
  while #out > keep do
    table.remove(out, 1)
  end
  return '[' .. table.concat(out, ',') .. ']'
end
