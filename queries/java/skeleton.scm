; Skeleton query for Java (see queries/rust/skeleton.scm for the capture names).
(class_declaration name: (identifier) @name) @item.class
(interface_declaration name: (identifier) @name) @item.interface
(enum_declaration name: (identifier) @name) @item.enum
(record_declaration name: (identifier) @name) @item.class
(annotation_type_declaration name: (identifier) @name) @item.interface
(method_declaration name: (identifier) @name body: (block) @body) @item.method
(method_declaration name: (identifier) @name !body) @item.method
(constructor_declaration name: (identifier) @name body: (constructor_body) @body) @item.method
(lambda_expression body: (block) @body)
(line_comment) @comment
(block_comment) @comment
