; Skeleton query for Go (see queries/rust/skeleton.scm for the capture names).
(function_declaration name: (identifier) @name body: (block) @body) @item.function
(method_declaration name: (field_identifier) @name body: (block) @body) @item.method
(type_declaration (type_spec name: (type_identifier) @name)) @item.type
(func_literal body: (block) @body)
(comment) @comment
